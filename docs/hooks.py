"""mkdocs hooks for the API pages (mkdocs.yml `hooks:`).

releval's docstrings are written in reStructuredText's manner; mkdocstrings renders them as Markdown,
which would leave Sphinx roles (:func:`name`), the ``~`` that shortens a role's target and the ``::``
that introduces a literal block on the page as text. This removes them from the rendered HTML.
"""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:func|mod|class|data|meth|attr|exc|obj):(?=<code>|<a [^>]*><code>)")


def on_page_content(html: str, page, config, files) -> str:
    html = ROLE.sub("", html)
    html = html.replace("<code>~", "<code>")
    return re.sub(r"::</p>", ":</p>", html)
