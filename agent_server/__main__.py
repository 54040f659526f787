import sys

from agent_server.cli import main

sys.exit(main())
