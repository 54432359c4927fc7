"""Run MySQL text on a real engine, and compare its result with pandas (Part IV).

One module per job: errors, schemas (DDL and CSV tables), transpile (MySQL to DuckDB),
engines (DuckDB or a MySQL/MariaDB server), compare (results as a judge compares them),
recorded (MariaDB's recorded answers and the side-by-side view), server (a throwaway
MariaDB). Everything is importable from `booktools.sql` itself.

Two engines run the same MySQL text:

- embedded (the default, nothing to install or start): DuckDB, after sqlglot has transpiled
  the MySQL text to DuckDB's dialect (plus four small fixes and two settings, see `transpile`
  and `duckdb_settings`);
- a MySQL-compatible server (MySQL or MariaDB), natively, when the environment variable
  BOOK_MYSQL_URL holds a URL such as mysql://root@127.0.0.1:3306/ . Each engine object works
  in a scratch database of its own, which it creates and drops.

    from booktools import sql
    world = pd.DataFrame({"name": ["Chad"], "area": [1284000]})
    sql.run("SELECT name FROM World WHERE area > 1000000", {"World": world})

`assert_same_result` compares two results the way a judge should: by column names and
values, with SQL NULL, NaN, pd.NA and NaT all meaning "missing", numbers compared as numbers
(1, 1.0 and Decimal('1.00') are equal) and row order ignored unless asked for.

Errors come out as one short, clear `SQLError`: `UnknownTableError`, `SQLSyntaxError`,
`ServerUnavailableError` (with what to do about it), not as a driver's traceback.

`python -m booktools.sql serve` starts a throwaway MariaDB server (if mariadb-server is
installed) and prints the BOOK_MYSQL_URL to use; the tests start one the same way.
"""

from booktools.display import Panel, SideBySide  # noqa: F401  (what compare_engines returns)
from booktools.sql.errors import (  # noqa: F401
    SQLError,
    UnknownTableError,
    SQLSyntaxError,
    ServerUnavailableError,
    PackageTooOldError,
    ResultMismatch,
)
from booktools.sql.schemas import (  # noqa: F401
    INTEGER_TYPES,
    FLOAT_TYPES,
    STRING_TYPES,
    NUMBERS,
    default_string_dtype,
    text_column,
    Column,
    TableSchema,
    parse_schema,
    schema_from_frame,
    read_csv_table,
)
from booktools.sql.transpile import (  # noqa: F401
    FIXES,
    SQLGLOT_FLOOR,
    require_sqlglot,
    duckdb_statements,
    format_sql,
    transpile,
    referenced_tables,
)
from booktools.sql.engines import (  # noqa: F401
    URL_ENV,
    result_frame,
    Engine,
    DUCKDB_AS_MYSQL,
    duckdb_settings,
    DuckDBEngine,
    MySQLServerEngine,
    open_engine,
    run,
)
from booktools.sql.compare import (  # noqa: F401
    normalise_value,
    row_sort_key,
    normalised_rows,
    assert_same_result,
    sorted_for_display,
)
from booktools.sql.recorded import (  # noqa: F401
    RECORD_ENV,
    RECORDED_FILE,
    NOT_RECORDED,
    evidence_key,
    load_recorded,
    outcome_on_server,
    compare_engines,
    translation_differs,
    mysql_normalised,
)
from booktools.sql.server import (  # noqa: F401
    SERVER_NAMES,
    INSTALL_NAMES,
    SEARCH_DIRS,
    mariadb_binaries,
    throwaway_mariadb,
)
