"""Every environment variable is declared once: the helper's in its table,
resolver/src/settings/settings_table.json (`culina-resolver version --json` lists it; the adapter
takes the rows of the two it parses too from the same file), the adapter's own in
adapter_settings.variables() (name, type, default, accepted form), the host's the adapter reads in
adapter_settings.HOST_VARIABLES. A variable read by name anywhere in
resolver/culina_resolver that none of them declares fails here; docs/ARCHITECTURE.md's settings
table is the listing of all three."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "resolver"))
from culina_resolver import adapter_settings  # noqa: E402
from culina_resolver import project_config  # noqa: E402

CULINA = project_config.ProjectConfig.load(REPO)
PACKAGE = REPO / "resolver" / "culina_resolver"
# The table's own reader takes the names from the table, not from the code.
READS_THE_TABLE = {("adapter_settings.py", "parse"), ("adapter_settings.py", "current")}


def adapter_names() -> set[str]:
    return {v.name for variables in adapter_settings.variables(CULINA).values() for v in variables}


def declared() -> set[str]:
    return adapter_names() | {v.name for v in adapter_settings.HOST_VARIABLES}


def _is_environ(node: ast.AST) -> bool:
    return re.search(r"(^|\.)environ$", ast.unparse(node)) is not None


def _names(key: ast.AST, function: ast.AST | None, module: ast.Module) -> set[str] | None:
    """The variable names `key` can be: a literal, a module constant, or the target of a loop over
    literals in the same function; None when the code cannot tell."""
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return {key.value}
    if isinstance(key, ast.Name):
        for scope in ([function] if function else []) + [module]:
            for node in ast.walk(scope):
                if (isinstance(node, ast.For) and isinstance(node.target, ast.Name) and node.target.id == key.id
                        and isinstance(node.iter, (ast.Tuple, ast.List))
                        and all(isinstance(e, ast.Constant) for e in node.iter.elts)):
                    return {e.value for e in node.iter.elts}
        for node in module.body:
            if (isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [key.id]
                    and isinstance(node.value, ast.Constant)):
                return {node.value.value}
    return None


def environment_reads(source: str, filename: str) -> list[tuple[str, int, set[str] | None, str]]:
    """(file, line, names or None, function) for each read of one variable by name:
    environ.get/pop/setdefault(X), environ[X], os.getenv(X), X in environ."""
    module = ast.parse(source)
    reads = []

    def visit(node: ast.AST, function: ast.AST | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node
        key = None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and ((node.func.attr in ("get", "pop", "setdefault") and _is_environ(node.func.value))
                     or ast.unparse(node.func) == "os.getenv")):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
              and _is_environ(node.comparators[0])):
            key = node.left
        if key is not None:
            reads.append((filename, node.lineno, _names(key, function, module), function.name if function else ""))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(module, None)
    return reads


def undeclared_reads(source: str, filename: str, names: set[str]) -> list[str]:
    problems = []
    for file, line, read, function in environment_reads(source, filename):
        if read is None and (file, function) not in READS_THE_TABLE:
            problems.append(f"{file}:{line} reads a variable the code does not name; read it through adapter_settings")
        for name in sorted((read or set()) - names):
            problems.append(f"{file}:{line} reads {name}, which no table declares (adapter_settings.variables or "
                            "HOST_VARIABLES)")
    return problems


def test_every_variable_the_adapter_reads_is_declared():
    problems = [problem for path in sorted(PACKAGE.glob("*.py"))
                for problem in undeclared_reads(path.read_text(), path.name, declared())]
    assert problems == []


def test_the_check_finds_the_reads_it_is_for():
    """Each form of read, with a declared and an undeclared name: the check cannot pass by seeing nothing."""
    source = '''
import os
LIMIT = "CULINA_LIMIT"
def f(environ, settings):
    os.environ.get("CULINA_OFFLINE"); os.environ["CXX"]; os.getenv("NO_SUCH")
    environ.get(LIMIT); "HOME" in os.environ
    for var in ("CUDA_HOME", "CUDA_SOMETHING"):
        os.environ.get(var)
    os.environ.get(settings.var("X"))
'''
    assert undeclared_reads(source, "m.py", declared()) == [
        "m.py:5 reads CULINA_OFFLINE, which no table declares (adapter_settings.variables or HOST_VARIABLES)",
        "m.py:5 reads NO_SUCH, which no table declares (adapter_settings.variables or HOST_VARIABLES)",
        "m.py:6 reads CULINA_LIMIT, which no table declares (adapter_settings.variables or HOST_VARIABLES)",
        "m.py:8 reads CUDA_SOMETHING, which no table declares (adapter_settings.variables or HOST_VARIABLES)",
        "m.py:9 reads a variable the code does not name; read it through adapter_settings",
    ]


def helper_table(resolver) -> dict[str, dict]:
    done = subprocess.run([str(resolver), "version", "--json"], capture_output=True, text=True, timeout=60, check=True)
    return {row["name"]: row for row in json.loads(done.stdout)["settings"]}


def test_the_adapter_declares_none_of_the_helpers_variables(resolver):
    """The adapter's own rows name no variable of the helper's; the helper's rows the adapter
    parses too are the helper's as it lists them, read from its table, not written again."""
    helper = helper_table(resolver)
    rows = [v for variables in adapter_settings.variables(CULINA).values() for v in variables]
    assert {v.name for v in rows if not v.helper} & set(helper) == set()
    taken = [v for v in rows if v.helper]
    assert {v.name for v in taken} == {CULINA.env_prefix + adapter_settings.CACHE_DIR,
                                       CULINA.env_prefix + adapter_settings.RELEASE_URL}
    for v in taken:
        assert (v.type, v.default, v.accepted) == tuple(helper[v.name][key] for key in ("type", "default", "accepted"))
    for v in rows:
        assert v.type and v.default and v.accepted, v.name


def test_a_switch_is_described_alike_on_both_sides(resolver):
    """The table's switch_words are listed into its switch_forms by each side (listed() in
    helper_settings.cpp, _listed here): the helper's switch rows end with the adapter's text."""
    helper = helper_table(resolver)
    for suffix in ("OFFLINE", "ONLY_BINARY", "BUILD_ON_MISMATCH"):
        assert helper[CULINA.env_prefix + suffix]["accepted"].endswith("; " + adapter_settings.ACCEPTED_SWITCH), suffix
    assert adapter_settings.ACCEPTED_SWITCH.startswith("1, true, yes or on; 0, false, no or off")


def test_the_helpers_table_is_one_file():
    """The data file both languages read is in the helper's sources, so the helper's source hash
    covers it, and no Python module of the adapter writes a helper row again."""
    table = adapter_settings.HELPER_TABLE
    assert adapter_settings.SETTINGS_TABLE_FILE.parent.parent == REPO / "resolver" / "src"
    suffixes = [row["suffix"] for row in table["settings"]]
    assert len(suffixes) == len(set(suffixes))
    for path in sorted(PACKAGE.glob("*.py")):
        for row in table["settings"]:
            assert row["accepted"] not in path.read_text(), f"{path.name} repeats {row['suffix']}'s accepted form"


def test_the_architecture_settings_table_lists_every_variable_once(resolver):
    """docs/ARCHITECTURE.md's table under "Settings" names each variable of the three declarations,
    and no other."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text().split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    listed = [name for cell in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", cell)]
    assert len(listed) == len(set(listed))
    assert set(listed) == declared() | set(helper_table(resolver))
