"""The modules the server's start and first turn import build their pydantic models from evaluated annotations.

Under `from __future__ import annotations` every field's annotation is a string that pydantic evaluates when it
builds the model: about 12% of the build, and the start and the first turn build some 70 of our models (9 ms of
their 117 ms, bench/README.md Part 9). A module that defines models on that path leaves annotations as they are;
its forward references are quoted (or `Self`).
"""

from __future__ import annotations

import json
import subprocess
import sys

FIND = """
import __future__, inspect, json, sys
import agent_server.server.app, agent_server.server.run, agent_server.server.streaming, agent_server.settings
import agent_server.llm.scripted
from agent_server.runtime.parts import import_turn_code
from pydantic import BaseModel
import_turn_code()
found = []
for name, module in sorted(sys.modules.items()):
    if not name.startswith("agent_server") or getattr(module, "annotations", None) is not __future__.annotations:
        continue
    models = [n for n, c in inspect.getmembers(module, inspect.isclass)
              if issubclass(c, BaseModel) and c.__module__ == name and c.__pydantic_fields__]
    if models:
        found.append(f"{name}: {', '.join(models)}")
print(json.dumps(found))
"""


def test_no_module_of_the_start_or_first_turn_defers_the_annotations_of_its_models() -> None:
    done = subprocess.run([sys.executable, "-c", FIND], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == []
