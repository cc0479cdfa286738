"""The modules of ivm_sql import each other without a cycle: not through the imports at the
top of a file, nor through one inside a function or under ``TYPE_CHECKING`` (grimp reads
them all). A cycle means two modules that cannot be understood, or changed, one at a time."""

from __future__ import annotations

import grimp


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph("ivm_sql", cache_dir=None)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join((importer, *back)))
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)
