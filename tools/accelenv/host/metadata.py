"""The GCE metadata server, asked only when the user allows it (`--metadata`), with a short timeout.

Through `accelenv.netio` like every exchange: `TIMEOUT` bounds connecting and each read, the whole exchange may
take `netio.DEADLINE_FACTOR` times that, and an answer over `MAX_VALUE` is not a metadata value."""

from __future__ import annotations

METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/"
TIMEOUT = 2.0
MAX_VALUE = 64 * 1024  # a machine type, a zone, an accelerator type: some tens of bytes


def fetch_metadata(key: str) -> str | None:
    """The value under `key`, or None when the server does not answer it (or is not there)."""
    from accelenv import netio  # only when asked: requests is the slowest import of the whole tool
    from accelenv.errors import NetworkError

    bounds = netio.limits("a metadata value", max_bytes=MAX_VALUE, timeout=TIMEOUT)
    try:
        with netio.session() as session:
            answer = netio.exchange(session, "GET", METADATA_URL + key, bounds, headers={"Metadata-Flavor": "Google"})
    except NetworkError:
        return None
    if answer.status_code != 200:
        return None
    return answer.text.strip() or None
