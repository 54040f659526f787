"""ACP prompt content blocks -> the one prompt text the model sees.

Text blocks are kept as they are. Embedded resources (`resource`, which `initialize` advertises as
`embeddedContext`) become their text under a header naming the URI; a binary resource becomes a line
saying it was left out. Resource links (`resource_link`, which every agent must accept) become a line
naming the resource, so the model can open it with its tools. Images and audio are not advertised:
a prompt carrying one is refused with a clear error rather than silently losing it.
"""

from __future__ import annotations

from collections.abc import Sequence

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

from agent_server.errors import InvalidArgument

PromptBlock = (
    TextContentBlock | ImageContentBlock | AudioContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock
)


def prompt_text(blocks: Sequence[PromptBlock]) -> str:
    """The prompt as one text, blocks separated by blank lines.

    Raises:
        InvalidArgument: an image or audio block, or a prompt without any text.
    """
    parts = [_block_text(block) for block in blocks]
    text = "\n\n".join(part for part in parts if part)
    if not text.strip():
        raise InvalidArgument("the prompt has no text")
    return text


def _block_text(block: PromptBlock) -> str:
    if isinstance(block, TextContentBlock):
        return block.text
    if isinstance(block, ResourceContentBlock):
        title = block.title or block.name
        return f"[resource: {title} <{block.uri}>]"
    if isinstance(block, EmbeddedResourceContentBlock):
        resource = block.resource
        if isinstance(resource, BlobResourceContents):
            return f"[resource <{resource.uri}> ({resource.mime_type or 'binary'}): binary content left out]"
        return f"Contents of <{resource.uri}>:\n```\n{resource.text}\n```"
    raise InvalidArgument(f"{block.type} content is not supported in prompts (only text and resources)")
