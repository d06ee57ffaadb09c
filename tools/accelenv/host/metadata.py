"""The GCE metadata server, asked only when the user allows it (`--metadata`), with a short timeout."""

from __future__ import annotations

METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/"
TIMEOUT = 2.0


def fetch_metadata(key: str) -> str | None:
    import requests  # only when asked: it is the slowest import of the whole tool

    try:
        response = requests.get(METADATA_URL + key, headers={"Metadata-Flavor": "Google"}, timeout=TIMEOUT)
    except requests.RequestException:
        return None
    if response.status_code != 200:
        return None
    return response.text.strip() or None
