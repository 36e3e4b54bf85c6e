"""An import-linter contract type the built-in ones lack: imports allowed only inside functions (never at load time)."""

from __future__ import annotations

import ast
import importlib.util

from importlinter.application import output
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def _load_time_import_lines(module: str) -> set[int]:
    """Lines of `module` whose imports run when it loads: everything outside function bodies."""
    with open(importlib.util.find_spec(module).origin, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    lines: set[int] = set()
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            lines.add(node.lineno)
        pending.extend(ast.iter_child_nodes(node))
    return lines


class ImportedOnlyInsideFunctionsContract(Contract):
    """`importers` import `imported` (and its submodules) only inside functions, so `imported` may import `importers`
    at module level without an import cycle: HackSoft's rule for Celery tasks and the services that enqueue them.

    Options: importers, imported (lists of modules)."""

    importers = fields.ListField(subfield=fields.ModuleField())
    imported = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        broken = []
        for importer in self.importers:
            load_time = _load_time_import_lines(importer.name)
            for target in self.imported:
                for module in sorted({target.name, *graph.find_descendants(target.name)}):
                    for detail in graph.get_import_details(importer=importer.name, imported=module):
                        if detail["line_number"] in load_time:
                            broken.append(f"{importer.name}:{detail['line_number']} imports {module} at load time: "
                                          f"{detail['line_contents']}")
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["broken"]:
            output.print_error(line)
            output.new_line()
