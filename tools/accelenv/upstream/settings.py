"""Which indexes a resolver on this machine would ask: pip's and uv's index settings.

Behind a mirror, `pip install` and `uv pip install` never see pypi.org: `PIP_INDEX_URL`, `UV_DEFAULT_INDEX` or an
`index-url` in pip.conf replace it, and extra indexes join it. `accelenv outdated` asks what they would ask, in
their order and with their rule for several indexes: uv takes the first index that has a project (so a
package cannot be swapped for another index's build), pip takes the best version across all of them.

uv's settings win when any is set (accelenv resolves its locks with uv); else pip's environment variables,
then pip's configuration files in pip's order (global, user, site; a later file overrides an earlier one).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

Strategy = Literal["first-index", "best-version"]


@frozen
class IndexSettings:
    """The machine's index settings: the index that replaces PyPI (None: PyPI), extra indexes, how several
    indexes are combined, and where the settings came from (for the report)."""

    main: str | None = None
    extra: tuple[str, ...] = ()
    strategy: Strategy = "first-index"
    origin: str = "defaults (PyPI)"

    def indexes_for(self, env_main: str | None, env_extra: Sequence[str]) -> tuple[str, ...]:
        """The indexes a pin of an environment is looked up in, in the resolver's order: the environment's own
        extra indexes, the machine's extra indexes, then the main index (the environment's own, else the
        machine's, else PyPI)."""
        from accelenv.upstream.indexes import PYPI_SIMPLE

        main = env_main or self.main or PYPI_SIMPLE
        ordered = [*env_extra, *self.extra, main]
        return tuple(dict.fromkeys(url.rstrip("/") for url in ordered))


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(part for part in (value or "").split() if part)


def pip_config_files(environ: Mapping[str, str], home: Path | None = None) -> list[Path]:
    """pip's configuration files, in the order pip reads them (later ones override earlier ones)."""
    if environ.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    home = home if home is not None else Path(environ.get("HOME") or Path.home())
    xdg_dirs = [d for d in environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d]
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs)] + [Path("/etc/pip.conf")]
    xdg_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files += [home / ".pip" / "pip.conf", xdg_home / "pip" / "pip.conf"]
    if environ.get("VIRTUAL_ENV"):
        files.append(Path(environ["VIRTUAL_ENV"]) / "pip.conf")
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def read_index_settings(environ: Mapping[str, str], config_files: Sequence[Path] | None = None) -> IndexSettings:
    """The settings a resolver started from `environ` would use (see the module's docstring)."""
    uv_main = environ.get("UV_DEFAULT_INDEX") or environ.get("UV_INDEX_URL")
    uv_extra = _split(environ.get("UV_INDEX")) + _split(environ.get("UV_EXTRA_INDEX_URL"))
    if uv_main or uv_extra:
        names = [n for n in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_INDEX", "UV_EXTRA_INDEX_URL") if environ.get(n)]
        return IndexSettings(main=uv_main, extra=uv_extra, strategy="first-index", origin=", ".join(names))
    main: str | None = None
    extra: tuple[str, ...] = ()
    origins: list[str] = []
    for path in config_files if config_files is not None else pip_config_files(environ):
        parser = configparser.RawConfigParser()
        from accelenv.errors import AccelenvError
        from accelenv.fileio import read_bytes

        try:  # bounded, never waiting on a FIFO
            parser.read_string(read_bytes(path, limit=1024 * 1024, what="pip configuration").decode("utf-8", "replace"))
        except (AccelenvError, configparser.Error):
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "index-url"):
                main, origin = parser.get(section, "index-url").strip(), str(path)
                origins.append(origin)
            if parser.has_option(section, "extra-index-url"):
                extra = _split(parser.get(section, "extra-index-url"))
                origins.append(str(path))
    if environ.get("PIP_INDEX_URL"):
        main = environ["PIP_INDEX_URL"]
        origins.append("PIP_INDEX_URL")
    if environ.get("PIP_EXTRA_INDEX_URL"):
        extra = _split(environ["PIP_EXTRA_INDEX_URL"])
        origins.append("PIP_EXTRA_INDEX_URL")
    if main is None and not extra:
        return IndexSettings()
    origin = ", ".join(dict.fromkeys(origins))
    return IndexSettings(main=main, extra=extra, strategy="best-version", origin=f"pip settings ({origin})")
