"""Whether a model endpoint is a local server (this machine or the local network), decided by its host.

A local server (llama.cpp, llama-cpp-python, Ollama, vLLM on a workstation) usually serves one request at a
time: a request it has not answered within the read timeout is still being worked on, and sending it again
only queues the copy behind the first. So a read timeout there is not retried by default.
"""

from __future__ import annotations

import ipaddress

LOCAL_NAMES = ("localhost", "host.docker.internal")


def is_local_host(host: str) -> bool:
    """`localhost` (and `*.localhost`), `host.docker.internal`, or a loopback, private or link-local address."""
    name = host.strip("[]").lower().rstrip(".")
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
