"""The docs keep their promises: every command block runs in the journey suite, and the generated
reference pages say what the code says.

* every ``bash``/``sh`` block of README.md and docs/**/*.md carries a ``<!-- journey: ID -->`` marker
  (a command the docs show is a command a test runs, exactly as written);
* every marker's id is named by a test of tests/journeys/ (a marked block nobody runs is a promise
  nobody checks), and no two blocks share an id;
* the README stays a ten-minute read, and keeps the blocks a newcomer starts from;
* docs/reference/{commands,configuration,outputs}.md are what docs/gen_reference.py writes from the
  parsers, conf/, dvc.yaml and releval.paths (`make docs` rewrites them).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from functools import cache

from support import ROOT
from support.doc_blocks import all_blocks, read_blocks, steps

README_MAX_LINES = 250
README_STEPS = {
    "default/repro",
    "default/activate",
    "own-corpus/start",
    "own-corpus/runs",
    "own-corpus/judge",
    "own-corpus/score",
}


@cache
def journey_strings() -> frozenset[str]:
    """Every string literal in the journey tests' source."""
    found: set[str] = set()
    for path in sorted((ROOT / "tests" / "journeys").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return frozenset(found)


def test_the_docs_have_command_blocks_to_check():
    blocks = all_blocks()
    assert {b.file for b in blocks} >= {"README.md", "docs/tutorials/first-grid.md"}
    assert sum(b.is_command for b in blocks) >= 20


def test_every_command_block_is_marked_for_the_journey_suite():
    unmarked = [f"{b.where} ({b.language})" for b in all_blocks() if b.language in ("bash", "sh") and not b.step]
    assert not unmarked, (
        "command blocks without a <!-- journey: ID --> marker (mark them and run them in tests/journeys/, "
        f"or write the command as prose): {unmarked}"
    )


def test_every_marker_is_run_by_a_journey_test():
    named = journey_strings()
    orphans = [f"{step} ({block.where})" for step, block in steps().items() if step not in named]
    assert not orphans, f"marked blocks no test in tests/journeys/ runs: {orphans}"


def test_no_two_blocks_share_a_journey_id():
    steps()  # raises, naming both places, when an id marks two blocks


def test_a_marker_belongs_to_the_block_right_after_it(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- journey: a/b -->\n```bash\necho a\n```\n\n<!-- journey: c/d -->\ntext\n```bash\necho c\n```\n")
    first, second = read_blocks(doc, tmp_path)
    assert (first.step, first.text) == ("a/b", "echo a\n")
    assert second.step is None


def test_the_readme_is_short_and_starts_a_newcomer_off():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the depth goes to docs/"
    in_readme = {b.step for b in all_blocks() if b.file == "README.md" and b.step}
    assert README_STEPS <= in_readme, sorted(README_STEPS - in_readme)
    text = "\n".join(lines)
    assert "source .venv/bin/activate" in text


@cache
def load_generator():
    """docs/gen_reference.py as a module (it is a script of the docs, not part of the package)."""
    spec = importlib.util.spec_from_file_location("releval_docs_gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_generated_reference_pages_are_up_to_date():
    stale = load_generator().stale_pages()
    assert not stale, "stale generated pages; run `python docs/gen_reference.py` (or `make docs`):\n" + "\n".join(
        f"docs/{page}:\n{diff}" for page, diff in stale.items()
    )


def test_the_reference_covers_every_command_option_and_key():
    from releval import cli

    gen = load_generator()
    commands = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    for name, parser in gen.command_parsers().items():
        assert f"## releval {name}" in commands
        for action in parser._actions:
            for option in [] if action.help == argparse.SUPPRESS or option_is_help(action) else action.option_strings:
                assert f"`{option}" in commands or f", {option}" in commands, (name, option)
    assert len(gen.command_parsers()) == len(cli.COMMANDS)
    configuration = (ROOT / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    params = gen.composed_defaults(ROOT / "conf")
    for dotted, _, leaf in gen.walk(params):
        if leaf and "." in dotted:
            assert f"| `{dotted}` |" in configuration, dotted


def option_is_help(action: argparse.Action) -> bool:
    return isinstance(action, argparse._HelpAction)


def test_a_key_takes_the_comment_beside_it(tmp_path):
    gen = load_generator()
    conf = tmp_path / "example.yaml"
    conf.write_text(
        "# What this file is.\n"
        "defaults:\n  - /judgments@_global_.judgments: x   # not a key\n  - _self_\n"
        "# The first key's own block.\n"
        "name: demo\n"
        "path: data/x  # where it is;\n"
        "              # continued here\n"
        "pattern: '^(?P<doc_id>[^#]+)#'   # a quoted '#' is no comment\n"
        "# A block above a nested section.\n"
        "ray:\n  actors: 2   # how many\n"
    )
    said = gen.parse_comments(conf)
    assert said.header == "What this file is. The first key's own block."
    assert said.keys["path"] == "where it is; continued here"
    assert said.keys["pattern"] == "a quoted '#' is no comment"
    assert said.keys["ray"] == "A block above a nested section."
    assert said.keys["ray.actors"] == "how many"
    assert said.defaults == ["/judgments@_global_.judgments: x", "_self_"]
