"""What a workspace tells its agent (README "Project instructions and skills"): its instruction files
(`instructions.py`) and its skills (`skills.py`), and the built-in tool `load_skill`.

`WorkspaceGuide` is what a turn asks (`agent.context.ProjectContext`): the guidance for its system prompt,
scanned afresh each turn in a worker thread (an edited AGENTS.md or a new skill counts from the next turn, and
the prompt stays the same through the rounds of one turn). The instructions of the subdirectories a built-in
call touches are looked up by the call itself (`instructions.InstructionLookup`). `load_skill` finds the skill
by a fresh scan too, so it answers for what is on disk now.
"""

import functools
import os
from dataclasses import dataclass

import anyio.to_thread
from pydantic import Field

from agent_server.errors import ToolFailure
from agent_server.tools.arguments import ToolArguments, input_schema
from agent_server.tools.instructions import instructions_in
from agent_server.tools.skills import (
    FILES_MAX,
    SkillSources,
    by_name,
    find_skills,
    names_of,
    read_body,
    skill_files,
)
from agent_server.tools.workspace import Output
from agent_server.types import ProjectGuidance, TextPart, ToolAnnotations, ToolSpec


@dataclass(frozen=True)
class WorkspaceGuide:
    """One workspace's instructions and skills. Implements `agent.context.ProjectContext`."""

    sources: SkillSources
    names: tuple[str, ...]
    """`instruction_files`."""
    max_bytes: int
    """`instructions_max_bytes`."""

    def scan(self) -> ProjectGuidance:
        """The root's instructions and the skills (blocking)."""
        root = self.sources.workspace
        instructions = instructions_in(root, root, self.names, self.max_bytes)
        if self.sources.limit == 0:
            return ProjectGuidance(instructions=instructions)
        found = find_skills(self.sources)
        return ProjectGuidance(
            instructions=instructions,
            skills=[skill.info for skill in found.skills],
            skipped=found.skipped,
            unlisted=found.unlisted,
        )

    async def guidance(self) -> ProjectGuidance:
        """`scan` in a worker thread; without an instruction file or a place for skills (the usual case: a few
        `stat` calls on the loop) there is nothing to read and no thread hop."""
        if not self._anything_to_read():
            return ProjectGuidance()
        return await anyio.to_thread.run_sync(self.scan, abandon_on_cancel=True)

    @functools.cached_property
    def _root_files(self) -> tuple[str, ...]:
        return tuple(str(self.sources.workspace / name) for name in self.names)

    def _anything_to_read(self) -> bool:
        return any(map(os.path.exists, self._root_files)) or self.sources.any_place()


class LoadSkillArguments(ToolArguments):
    name: str = Field(description="The skill's name, as the system prompt's list of skills gives it.")


LOAD_SKILL_SPEC = ToolSpec(
    name="load_skill",
    description=(
        "Load an Agent Skill listed in the system prompt: returns its instructions (the body of its SKILL.md) "
        "and the list of its files. Read those files with read_file when the instructions point to them; run "
        "a skill's scripts only with run_command."
    ),
    input_schema=input_schema(LoadSkillArguments),
    annotations=ToolAnnotations(read_only=True, destructive=False, idempotent=True, open_world=False),
    kind="read",
)


def load_skill(sources: SkillSources, args: LoadSkillArguments) -> Output:
    """The body and the files of the skill `args.name` (blocking). ToolFailure: no such skill (naming those there
    are) or its SKILL.md cannot be read."""
    scan = find_skills(sources)
    skill = by_name(scan, args.name)
    if skill is None:
        raise ToolFailure(f"no skill named {args.name!r}; the skills are: {names_of(scan.skills)}")
    try:
        body, truncated = read_body(skill, sources.max_bytes)
    except (OSError, ValueError) as exc:  # changed since it was found: a FrontMatterError or a decode error
        raise ToolFailure(f"cannot load skill {args.name!r}: {exc}") from None
    files, files_cut = skill_files(skill)
    folder = skill.info.path.rsplit("/", 1)[0]
    lines = [f"# Skill {skill.info.name} ({skill.info.path})", "", body or "[the skill has no instructions]"]
    if truncated:
        lines.append(f"\n[cut at {sources.max_bytes} bytes (skill_max_bytes); read the rest with read_file]")
    lines += ["", f"Files of the skill (folder {folder}; read them with read_file):"]
    lines += [f"- {path}" for path in files] or ["[none]"]
    if files_cut:
        lines.append(f"[only the first {FILES_MAX} files are listed]")
    structured = {
        "name": skill.info.name,
        "path": skill.info.path,
        "files": files,
        "truncated": truncated,
        "files_truncated": files_cut,
    }
    return [TextPart(text="\n".join(lines))], structured
