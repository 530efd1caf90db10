"""negolib's layers are a checked contract: the import-linter contracts of ``pyproject.toml`` run here, so
``make test`` (and CI) fails on a violation; ``make lint`` runs the same contracts through ``lint-imports``.

Also checked: every module of negolib has a place in the layers (a new module must be placed), every module
is a game's, the study of the paper's game (allowed to import it) or barred from importing any game, and the
contracts as written do catch violations (they are run on a stub copy of negolib into which violating imports are
written).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter import api  # importing it configures the readers
from importlinter.application.use_cases import create_report, read_user_options
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import registry

registry.register(LayersContract, "layers")  # what `lint-imports` registers before it reads a config
registry.register(ForbiddenContract, "forbidden")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
# The study of the paper's game (and the command line, book and widgets over it): these may import a game; every
# other module is a game's (negolib.games) or barred from importing one (contract "games").
MAY_IMPORT_GAMES = {"negolib.cli", "negolib.__main__", "negolib.book.handout", "negolib.book.context",
                    "negolib.book.runner", "negolib.book.site", "negolib.book.widgets",
                    "negolib.study.report", "negolib.study.analysis", "negolib.tournament", "negolib.study.evaluation",
                    "negolib.study.eval_protocol", "negolib.study.reading", "negolib.study.diagnostics",
                    "negolib.study.efficiency", "negolib.study.cost", "negolib.study.paired", "negolib.params",
                    "negolib.params_checks",
                    "negolib.game_params", "negolib.profile_genius", "negolib.agent_spec",
                    "negolib.agents.factory", "negolib.study.runs", "negolib.study.lesson",
                    "negolib.study.lesson_start", "negolib.study.lesson_seeds", "negolib.study.ladder",
                    "negolib.study.ladder_trl", "negolib.envs",
                    "negolib.games"}
# package inits: they import only the shared machinery (study and book: nothing)
PACKAGE_INITS = {"negolib", "negolib.agents", "negolib.training", "negolib.study", "negolib.book"}


def _contracts() -> list[dict[str, Any]]:
    return api.read_configuration(str(PYPROJECT))["contracts_options"]


def _contract(contract_id: str) -> dict[str, Any]:
    (found,) = [c for c in _contracts() if c.get("id") == contract_id]
    return found


def _layer_modules(layers: list[str]) -> list[str]:
    """The module names of a layers contract's entries ("(a) : b" -> a, b)."""
    return [m.strip().strip("()") for entry in layers for m in re.split(r"[|:]", entry) if m.strip()]


def _imports(metadata: Any) -> list[str]:
    """Every ``importer -> imported (lines)`` edge named anywhere in a broken contract's metadata."""
    out: list[str] = []
    if isinstance(metadata, dict):
        if "importer" in metadata and "imported" in metadata:
            lines = ", ".join(str(n) for n in metadata.get("line_numbers") or ())
            out.append(f"{metadata['importer']} -> {metadata['imported']} (l.{lines})")
        for v in metadata.values():
            out += _imports(v)
    elif isinstance(metadata, (list, tuple)):
        for v in metadata:
            out += _imports(v)
    return out


def _check(config: Path) -> dict[str, tuple[bool, list[str]]]:
    """{contract name: (kept, the offending imports)} of the contracts in ``config``."""
    report = create_report(read_user_options(str(config)), cache_dir=None)
    return {c.name: (check.kept, _imports(check.metadata)) for c, check in report.get_contracts_and_checks()}


# -- the project's contracts -------------------------------------------------------------------------


def test_the_layers_and_the_games_contract_hold():
    results = _check(PYPROJECT)
    assert len(results) == len(_contracts()) >= 2
    broken = {name: edges for name, (kept, edges) in results.items() if not kept}
    assert not broken, "import contracts broken (see [tool.importlinter] in pyproject.toml):\n" + "\n".join(
        f"{name}:\n  " + "\n  ".join(edges) for name, edges in broken.items())


def test_every_module_has_a_layer():
    named = _layer_modules(_contract("layers")["layers"])
    graph = grimp.build_graph("negolib", cache_dir=None)
    placed = lambda m: any(m == n or m.startswith(n + ".") or n.startswith(m + ".") for n in named)  # noqa: E731
    unplaced = sorted(m for m in graph.modules if m != "negolib" and not placed(m))
    assert not unplaced, f"modules with no layer: {unplaced}; name each in a layer of pyproject.toml's " \
                         "[tool.importlinter] contract 'layers' (the lowest it fits)"


def test_only_the_allowed_modules_may_import_a_game():
    sources = set(_contract("games")["source_modules"])
    assert _contract("games")["forbidden_modules"] == ["negolib.games"]
    graph = grimp.build_graph("negolib", cache_dir=None)
    under = lambda m, names: any(m == n or m.startswith(n + ".") for n in names)  # noqa: E731
    unbarred = sorted(m for m in graph.modules
                      if m not in PACKAGE_INITS and not under(m, sources) and not under(m, MAY_IMPORT_GAMES))
    assert not unbarred, f"modules neither a game's, nor the study's, nor barred from importing negolib.games: " \
                         f"{unbarred}; add them to source_modules of pyproject.toml's contract 'games' (or, for the " \
                         "paper's study, to MAY_IMPORT_GAMES here)"


# -- the contracts can fail --------------------------------------------------------------------------

VIOLATIONS: dict[tuple[str, str], tuple[str, ...]] = {
    # (importer, imported): the contracts that must break
    ("params", "agents.factory"): ("layers",),  # the profile below the agent builder
    ("agents.factory", "study.runs"): ("layers",),  # the agent builder launching training
    ("study.analysis.contrasts", "study.report.tables"): ("layers",),  # compute below presentation
    ("study.report.tables", "book.context"): ("layers",),  # the report layer below the book runner
    ("book.context", "study.report.tables"): (),  # allowed: the book may present
    ("book.runner", "book.site"): ("layers",),  # the runner below the site built over its output
    ("games.multi_issue.env", "core.transcripts"): (),  # allowed: a game over the shared machinery
    ("study.evaluation", "games.multi_issue.env"): (),  # allowed: the paper's study over its game
    ("training.grpo", "games.multi_issue.env"): ("layers", "games"),  # the shared trainer naming the paper's game
    ("agents.hf_agent", "games.multi_issue.prompts"): ("layers", "games"),  # an agent rendering a game's prompts
    ("stats", "games.base"): ("layers", "games"),  # the bootstrap naming the games
    ("games.training", "games.bilateral.env"): ("games-share",),  # what the games share naming one game
    ("games.toolagents", "games.bilateral.agents"): ("games-share",),  # the shared tool agents naming one game
    ("games.multi_buyer.agents", "games.bilateral.agents"): ("games-apart",),  # one game building on another
    ("games.bilateral.env", "games.multi_issue.env"): ("games-apart",),
    ("games.multi_product.agents", "games.bilateral.agents"): ("games-apart-markets",),
    ("games.multi_buyer.agents", "games.multi_product.agents"): ("games-apart",),  # the markets the wrong way round
    ("games.multi_product.agents", "games.multi_buyer.agents"): (),  # allowed: the markets share their machinery
    ("games.multi_buyer.agents", "games.toolagents"): (),  # allowed: a game over the shared tool agents
}


def _stub_package(root: Path, name: str, modules: list[str], imports: dict[str, list[str]]) -> None:
    """A package ``name`` under ``root`` holding ``modules`` (dotted, relative), each importing ``imports``."""
    for mod in modules:
        parts = mod.split(".")
        for i in range(len(parts) - 1):
            pkg = root / name / Path(*parts[: i + 1])
            pkg.mkdir(parents=True, exist_ok=True)
            (pkg / "__init__.py").touch()
        path = root / name / Path(*parts[:-1]) / f"{parts[-1]}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        if (root / name / Path(*parts)).is_dir():  # also a package: its __init__ imports
            path = root / name / Path(*parts) / "__init__.py"
        path.write_text("".join(f"import {name}.{m}\n" for m in imports.get(mod, [])))
    (root / name / "__init__.py").touch()


def _stub_config(path: Path, name: str) -> Path:
    """The project's contracts with negolib's modules renamed into package ``name`` (a TOML file)."""
    rename = lambda m: re.sub(r"\bnegolib\b", name, m)  # noqa: E731
    lines = ["[tool.importlinter]", f'root_package = "{name}"']
    for contract in _contracts():
        lines.append("[[tool.importlinter.contracts]]")
        for k, v in contract.items():
            v = [rename(m) for m in v] if k in ("layers", "source_modules", "forbidden_modules") else v
            lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("inject", [[], *[[v] for v in VIOLATIONS]], ids=lambda v: "clean" if not v else
                         f"{v[0][0]}->{v[0][1]}")
def test_the_contracts_catch_violations(tmp_path, monkeypatch, inject):
    """A stub negolib with every module the contracts name passes them; written into it, each violating
    import breaks the contract it must break (and an allowed one breaks none)."""
    name = f"stub_negolib_{len(inject)}_{abs(hash(tuple(inject))) % 10**8}"
    contracts = _contracts()
    modules = [m.removeprefix("negolib.") for m in _layer_modules(_contract("layers")["layers"])]
    modules += [m.removeprefix("negolib.") for c in contracts
                for m in (*c.get("source_modules", []), *c.get("forbidden_modules", []))]
    modules += ["games.base", "study.report.tables", "study.analysis.contrasts", "games.multi_issue.env",
                "games.multi_issue.prompts", "games.bilateral.env", "games.training", "training.grpo",
                "games.bilateral.agents", "games.multi_buyer.agents", "games.multi_product.agents"]
    modules = sorted(set(modules) - {"negolib"})
    imports: dict[str, list[str]] = {}
    for importer, imported in inject:
        imports.setdefault(importer, []).append(imported)
    _stub_package(tmp_path, name, modules, imports)
    monkeypatch.syspath_prepend(str(tmp_path))
    results = _check(_stub_config(tmp_path / "contracts.toml", name))
    expected = {cid for v in inject for cid in VIOLATIONS[v]}
    by_id = {c.get("id"): results[c["name"]] for c in contracts}
    assert {cid for cid, (kept, _) in by_id.items() if not kept} == expected, by_id
    for importer, imported in inject:
        for cid in VIOLATIONS[(importer, imported)]:
            _, edges = by_id[cid]
            assert any(e.startswith(f"{name}.{importer} -> {name}.{imported} ") for e in edges), edges
