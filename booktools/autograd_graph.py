"""Print the autograd graph behind a tensor, by node names only.

A node's repr contains its memory address, which changes on every run, so chapters print
graphs with `print_graph` instead: one line per node, children indented, leaves labelled
with the names the caller gives them.

    >>> print_graph(loss, names={"W": W, "b": b})
    SumBackward0
    └─ AddBackward0
       ├─ MmBackward0
       ...
"""

from __future__ import annotations

__all__ = ["graph_lines", "node_name", "print_graph"]


def node_name(node) -> str:
    """The class name of a graph node, e.g. 'MmBackward0', 'AccumulateGrad', 'LinearFunctionBackward'."""
    return type(node).__name__


def _leaf_label(node, names: dict) -> str:
    variable = node.variable
    for name, tensor in names.items():
        if tensor is variable:
            return f"{node_name(node)} -> {name} {list(variable.shape)}"
    return f"{node_name(node)} -> leaf {list(variable.shape)}"


def graph_lines(root, names: dict | None = None, max_depth: int = 30) -> list[str]:
    """The graph below `root` (a tensor or a grad_fn node) as indented lines.

    names maps a label to a leaf tensor, so its AccumulateGrad node says which tensor it
    accumulates into. A `None` entry in next_functions (an input that needs no gradient)
    is printed as "None". A node reached twice is printed twice.
    """
    names = names or {}
    node = getattr(root, "grad_fn", root)
    if node is None:
        return ["None (the tensor is not part of an autograd graph)"]
    lines: list[str] = []

    def visit(node, prefix: str, connector: str, depth: int) -> None:
        if node is None:
            lines.append(f"{prefix}{connector}None")
            return
        label = _leaf_label(node, names) if hasattr(node, "variable") else node_name(node)
        lines.append(f"{prefix}{connector}{label}")
        if depth >= max_depth:
            if node.next_functions:
                lines.append(f"{prefix}   ...")
            return
        children = [child for child, _ in node.next_functions]
        if depth == 0:
            child_prefix = ""
        else:
            child_prefix = prefix + ("   " if connector == "└─ " else "│  ")
        for i, child in enumerate(children):
            visit(child, child_prefix, "└─ " if i == len(children) - 1 else "├─ ", depth + 1)

    visit(node, "", "", 0)
    return lines


def print_graph(root, names: dict | None = None, max_depth: int = 30) -> None:
    """Print `graph_lines(root, names, max_depth)`."""
    print("\n".join(graph_lines(root, names, max_depth)))
