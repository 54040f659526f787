"""What a model call costs: the built-in price table, the lookup of a model's price, and the pricing of usage.

The table is a snapshot of the vendors' list prices in USD per million tokens (checked when this module last
changed; see `CHECKED`); settings `prices` (and, for Chat Completions, `openai.prices`) override or extend it per
model. A model is found by its exact name, or as a table name followed by a date or `-latest`
(`claude-sonnet-4-5-20250929`, `gpt-4.1-mini-2025-04-14`): never by a looser prefix, since `gpt-4.1-pro` is not
`gpt-4.1`. An unknown price is `None`, and so is the cost it would give: never 0.

Cache pricing: Anthropic bills a cache write at 1.25x input (5-minute entries, the kind agent-server writes)
and a read at 0.1x; OpenAI bills cached input at a model's cached-input rate and writes nothing extra.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent_server.settings import Price
from agent_server.types import Usage

CHECKED = "2025-11"
"""When the list prices below were last checked."""


def _price(input_: float, output: float, read: float, write: float) -> Price:
    return Price(input_per_mtok=input_, output_per_mtok=output, cache_read_per_mtok=read, cache_write_per_mtok=write)


BUILT_IN: dict[str, Price] = {
    "claude-opus-4-5": _price(5, 25, 0.5, 6.25),
    "claude-opus-4-1": _price(15, 75, 1.5, 18.75),
    "claude-opus-4-0": _price(15, 75, 1.5, 18.75),
    "claude-opus-4": _price(15, 75, 1.5, 18.75),
    "claude-sonnet-4-5": _price(3, 15, 0.3, 3.75),
    "claude-sonnet-4-0": _price(3, 15, 0.3, 3.75),
    "claude-sonnet-4": _price(3, 15, 0.3, 3.75),
    "claude-3-7-sonnet": _price(3, 15, 0.3, 3.75),
    "claude-haiku-4-5": _price(1, 5, 0.1, 1.25),
    "claude-3-5-haiku": _price(0.8, 4, 0.08, 1),
    "gpt-5": _price(1.25, 10, 0.125, 0),
    "gpt-5-mini": _price(0.25, 2, 0.025, 0),
    "gpt-5-nano": _price(0.05, 0.4, 0.005, 0),
    "gpt-4.1": _price(2, 8, 0.5, 0),
    "gpt-4.1-mini": _price(0.4, 1.6, 0.1, 0),
    "gpt-4.1-nano": _price(0.1, 0.4, 0.025, 0),
    "gpt-4o": _price(2.5, 10, 1.25, 0),
    "gpt-4o-mini": _price(0.15, 0.6, 0.075, 0),
    "o3": _price(2, 8, 0.5, 0),
    "o4-mini": _price(1.1, 4.4, 0.275, 0),
}

_VERSION_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)")


def price_table(*overrides: Mapping[str, Price]) -> dict[str, Price]:
    """The built-in table with each of `overrides` over it, later ones winning."""
    table = dict(BUILT_IN)
    for override in overrides:
        table.update(override)
    return table


def price_for(model: str | None, table: Mapping[str, Price]) -> Price | None:
    """`model`'s price in `table`: its exact name, else a name it extends with a date or `-latest`."""
    if not model:
        return None
    if model in table:
        return table[model]
    for name in sorted(table, key=len, reverse=True):
        if model.startswith(name) and _VERSION_SUFFIX.fullmatch(model[len(name) :]):
            return table[name]
    return None


def priced(usage: Usage, price: Price | None) -> Usage:
    """`usage` with `cost_usd` from `price`: None when the price, a count it needs, or a cache rate that the
    call's cache tokens need is unknown."""
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    if price is None or prompt is None or completion is None:
        return usage.model_copy(update={"cost_usd": None})
    read, write = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    read_rate = price.cache_read_per_mtok if read else 0.0
    write_rate = price.cache_write_per_mtok if write else 0.0
    if read_rate is None or write_rate is None:
        return usage.model_copy(update={"cost_usd": None})
    plain = max(0, prompt - read - write)
    cost = plain * price.input_per_mtok + read * read_rate + write * write_rate + completion * price.output_per_mtok
    return usage.model_copy(update={"cost_usd": cost / 1e6})
