"""The deterministic start of every notebook, and small helpers for showing evidence."""

import contextlib
import os
import random

# Stored outputs are compared with fresh runs, so every notebook must compute the same
# numbers every time: fixed seeds, a fixed number of threads (a parallel reduction splits
# its work by thread count, which changes floating-point rounding), fixed print formats.
DEFAULT_SEED = 0
DEFAULT_THREADS = 2


def setup_notebook(seed: int = DEFAULT_SEED, threads: int = DEFAULT_THREADS) -> None:
    """Seed every random generator, pin the thread count and fix print formats. Prints nothing.

    torch is optional: Part IV (pandas and SQL) runs without it, and does not import it.
    """
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))  # for worker processes we start
    np.set_printoptions(precision=4, suppress=True, linewidth=88)

    try:
        import torch
    except ImportError:
        pass
    else:
        torch.manual_seed(seed)  # seeds the CPU and every CUDA device
        torch.set_num_threads(threads)
        torch.set_printoptions(precision=4, sci_mode=False, linewidth=88)

    try:
        import pandas as pd
    except ImportError:  # pandas is only needed by some chapters
        pass
    else:
        pd.set_option("display.width", 88)
        pd.set_option("display.max_columns", 20)
        pd.set_option("display.precision", 4)

    try:
        import matplotlib as mpl
    except ImportError:
        pass
    else:
        mpl.rcParams.update(
            {
                "figure.figsize": (6.4, 3.6),
                "figure.dpi": 80,  # small PNGs keep the committed notebooks lean
                "axes.grid": True,
                "grid.alpha": 0.3,
                "font.size": 10,
            }
        )


@contextlib.contextmanager
def expect_error(*error_types: type[BaseException]):
    """Run a block that must fail, and print the error the reader is meant to see.

    A notebook that shows an error this way keeps running, and the printed message is
    compared by nbval like any other output. If the block does *not* raise, that is a
    bug in the lesson, so we fail loudly.
    """
    if not error_types:
        error_types = (Exception,)
    try:
        yield
    except error_types as exc:
        message = str(exc).strip().splitlines()
        print(f"{type(exc).__name__}: {message[0] if message else ''}")
        for line in message[1:]:
            print(f"    {line}")
    else:
        names = ", ".join(t.__name__ for t in error_types)
        raise AssertionError(f"expected {names}, but the block ran without error")


try:
    from myst_nb import glue
except ImportError:  # Jupyter without the book's tools: nothing stores the value for the page

    def glue(name: str, variable, display: bool = True) -> None:
        """Stand-in for myst-nb's `glue`: show the value here, since no page will.

        The markdown then shows the placeholder ({glue:text}`name`) instead of the value,
        so a value glued without being displayed is printed with its name.
        """
        if display:
            from IPython.display import display as show

            show(variable)
        else:
            print(f"{name}: {variable}")
