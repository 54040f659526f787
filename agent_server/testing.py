"""Testing aids for programs that embed or drive agent-server.

`ScriptedLLM` replays a script of model responses (see its module, `agent_server.llm.scripted`, for the
format); `assert_complete()` fails a test that left responses unused:

```python
from agent_server import AgentRuntime, Settings
from agent_server.testing import ScriptedLLM

llm = ScriptedLLM([{"tool_calls": [{"name": "list_dir", "arguments": {}}]}, {"content": "Two files."}])
async with AgentRuntime(Settings(workspace=tmp_path), llm=llm) as runtime:
    record = await runtime.run_turn("What is here?")
llm.assert_complete()
```
"""

from __future__ import annotations

from agent_server.llm.scripted import ScriptedLLM, ScriptedResponse

__all__ = ["ScriptedLLM", "ScriptedResponse"]
