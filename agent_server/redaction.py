"""Redaction: the one place that hides secrets in text before it reaches a log, a record, an error or the model.

`redact(text, secrets)` replaces every occurrence of each given secret (an API key, a `${VAR}` value
expanded into a mounted server's URL or headers, a header value) with `***`, and hides the
credentials of every http(s) URL in the text whatever they are: the userinfo (`user:password@`)
and the value of every query parameter (`?key=***`). Secrets are masked on the whole text, longest
first, so that one secret containing another is not left half shown; callers cut text only after
redacting it. `RedactingFilter` applies the same function to log records of libraries that log
request URLs (httpx, the SDK's HTTP client).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_MIN_SECRET_CHARS = 4
"""Shorter values (an empty or one-letter variable) would mask ordinary text without protecting anything."""
_URL = re.compile(r"https?://[^\s'\"<>]+", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with each of `secrets` and every credential inside an http(s) URL replaced by `***`."""
    for secret in sorted({s for s in secrets if len(s) >= _MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def redact_url(url: str) -> str:
    """`url` with its userinfo and its query values replaced by `***` (scheme, host, path and keys kept)."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not parseable as a URL (e.g. a bad port): hide everything after the host part
        return url.split("//", 1)[0] + "//" + MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = MASK + "@" + netloc.rsplit("@", 1)[1]
    query = "&".join(_redact_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _redact_pair(pair: str) -> str:
    key, equals, value = pair.partition("=")
    return f"{key}={MASK}" if equals and value else pair


class RedactingFilter(logging.Filter):
    """Redacts the records of one logger (see `redact_logger`), with the secrets known so far."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message, self.secrets)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def redact_logger(name: str, secrets: Iterable[str] = ()) -> None:
    """Redact every record the logger `name` itself emits: URL credentials always, and `secrets` from now on.

    A filter on a logger does not see its child loggers' records, so name each logger that logs URLs.
    """
    logger = logging.getLogger(name)
    found = next((f for f in logger.filters if isinstance(f, RedactingFilter)), None)
    if found is None:
        found = RedactingFilter()
        logger.addFilter(found)
    found.secrets.update(secrets)
