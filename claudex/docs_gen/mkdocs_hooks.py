"""The mkdocs hooks of the docs site (mkdocs.yml `hooks:`): every build first writes the
reference pages from the code, so a site never shows a table the code no longer has, and the
screenshots the README shows (screenshots/*.png, rendered by `make screenshots`) are served from
where they are instead of a second copy under docs/.

mkdocs loads this file by its path; it imports the rest of the generator as a package.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from claudex.docs_gen.pages import write

log = logging.getLogger("mkdocs.plugins.claudex")
SCREENSHOTS = "screenshots"


def _root(config: MkDocsConfig) -> Path:
    # mkdocs.yml sits at the top of the repository.
    return Path(config.config_file_path).resolve().parent


def on_pre_build(config: MkDocsConfig) -> None:
    for path in write(_root(config)):
        log.info("claudex: wrote %s from the code", path)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root = _root(config)
    for image in sorted((root / SCREENSHOTS).glob("*.png")):
        files.append(File.generated(config, f"{SCREENSHOTS}/{image.name}",
                                    abs_src_path=str(image)))
    return files
