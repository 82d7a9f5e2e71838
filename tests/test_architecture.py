"""The direction of imports is stated once (pyproject.toml, docs/ARCHITECTURE.md): one
import-linter `layers` contract that places every module of ours, ignores no import,
and leaves forbidden contracts only what layers cannot say (external libraries).
`make lint` checks the contract; these check that nothing escapes it."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parent.parent
OURS = ("ladder", "billing", "omniroute_admin")


def _contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layer_modules(contract: dict[str, Any]) -> list[str]:
    modules: list[str] = []
    for layer in contract["layers"]:
        separator = "|" if "|" in layer else ":"
        modules.extend(name.strip() for name in layer.split(separator))
    return modules


def _is_in(module: str, declared: list[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in declared)


def test_one_layers_contract_and_no_ignored_import() -> None:
    contracts = _contracts()

    assert [c["type"] for c in contracts] == ["layers", "forbidden"]
    assert [c for c in contracts if c.get("ignore_imports")] == []


def test_forbidden_contracts_name_only_external_libraries() -> None:
    forbidden = [c for c in _contracts() if c["type"] == "forbidden"]

    named = {m.split(".")[0] for c in forbidden for m in c["forbidden_modules"]}
    assert named == {"django", "celery", "httpx"}


def test_every_module_of_ours_is_in_a_layer() -> None:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    declared = _layer_modules(layers)
    graph = grimp.build_graph(*OURS)

    outside = sorted(m for m in graph.modules if not _is_in(m, declared))

    # Only the three packages themselves: a layer cannot contain another.
    assert outside == sorted(OURS)


def test_no_module_of_ours_is_in_an_import_circle() -> None:
    # A late import inside a function counts: it hides a circle, it does not end it.
    graph = grimp.build_graph(*OURS)

    circles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported in graph.modules and graph.chain_exists(importer=imported, imported=importer)
    )

    assert circles == []
