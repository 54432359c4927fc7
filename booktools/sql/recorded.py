"""MariaDB's answers, recorded for the notebooks, and the engines side by side."""

from __future__ import annotations


import datetime
import decimal
import hashlib
import json
import math
import os
import re

import pandas as pd
from filelock import FileLock

from booktools.display import Panel, SideBySide
from booktools.paths import DATA_DIR
from booktools.sql.engines import DuckDBEngine, MySQLServerEngine, URL_ENV, _rows, result_frame
from booktools.sql.errors import SQLError
from booktools.sql.schemas import parse_schema, schema_from_frame
from booktools.sql.transpile import _parse_mysql, format_sql, transpile



RECORD_ENV = "BOOK_RECORD_MARIADB"
RECORDED_FILE = DATA_DIR / "leetcode-pandas" / "mariadb-recorded.json"
NOT_RECORDED = "no recorded answer for this query"


# ------------------------------------------------- MariaDB evidence recorded for the notebooks
def _table_payload(tables, schemas):
    payload = {}
    for name, frame in (tables or {}).items():
        schema = (schemas or {}).get(name) or schema_from_frame(name, frame)
        payload[name] = {"ddl": schema.mysql_ddl(), "rows": [[_json_value(v) for v in r] for r in _rows(frame, schema)]}
    return payload


def _json_value(value):
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, datetime.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"date": value.isoformat()}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def _from_json(value):
    if isinstance(value, dict):
        (kind, text), = value.items()
        return {"decimal": decimal.Decimal, "date": datetime.date.fromisoformat,
                "datetime": datetime.datetime.fromisoformat, "bytes": bytes.fromhex}[kind](text)
    return value


def evidence_key(mysql: str, payload: dict) -> str:
    blob = json.dumps({"sql": mysql, "tables": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_recorded() -> dict:
    if RECORDED_FILE.is_file():
        return json.loads(RECORDED_FILE.read_text(encoding="utf-8"))
    return {"server": None, "entries": {}}


def outcome_on_server(url: str, mysql: str, payload: dict) -> dict:
    """Run the MySQL text on the server at `url` with the tables of a payload; a JSON-able outcome."""
    with MySQLServerEngine(url) as engine:
        for name, table in payload.items():
            schema = parse_schema(table["ddl"])[name]
            engine._create(schema, [tuple(_from_json(v) for v in row) for row in table["rows"]])
            engine.schemas[name] = schema
        try:
            frame = engine.execute(mysql)
        except SQLError as err:
            code = re.search(r"\[error (\d+)\]", str(err))
            return {"server": engine.version, "error": f"{type(err).__name__}: {err}",
                    "code": int(code[1]) if code else None}
        if frame is None:
            return {"server": engine.version, "columns": [], "rows": []}
        rows = [[_json_value(v) for v in row] for row in frame.astype(object).itertuples(index=False, name=None)]
        rows = [[None if (isinstance(v, float) and math.isnan(v)) or v is pd.NA else v for v in r] for r in rows]
        return {"server": engine.version, "columns": list(frame.columns), "rows": rows}


def _outcome_panel(outcome: dict, caption: str) -> Panel:
    if "error" in outcome:
        return Panel(caption, text=outcome["error"])
    rows = [tuple(_from_json(v) for v in row) for row in outcome["rows"]]
    return Panel(caption, frame=result_frame(outcome["columns"], rows))


def compare_engines(mysql: str, tables: dict[str, pd.DataFrame] | None = None, *, schemas=None,
                    pandas: dict | None = None, show_sql: bool = True) -> SideBySide:
    """Run MySQL text on DuckDB (live) and show it next to MariaDB's answer, plus any pandas results.

    The MariaDB answer is the one recorded in data/leetcode-pandas/mariadb-recorded.json by a
    run with BOOK_MYSQL_URL and BOOK_RECORD_MARIADB=1 set; tests/test_sql_mariadb.py re-runs
    every recorded query on a live MariaDB and fails if the answer changed. A query that was
    never recorded runs live on the server in BOOK_MYSQL_URL if that is set (so readers can
    try their own), else its panel says that there is no answer. Errors are results too: each
    engine's panel shows the error it raised.
    """
    payload = _table_payload(tables, schemas)
    key = evidence_key(mysql, payload)
    panels = []
    try:
        duck_sql = transpile(mysql, pretty=True)
    except SQLError as err:
        duck_sql = None
        panels.append(Panel("DuckDB", text=f"{type(err).__name__}: {err}"))
    if duck_sql is not None:
        with DuckDBEngine() as duck:
            duck.load(tables or {}, schemas)
            try:
                frame = duck.execute(mysql)
                panels.append(Panel("DuckDB", frame=frame) if frame is not None else Panel("DuckDB", text="(ok)"))
            except SQLError as err:
                panels.append(Panel("DuckDB", text=f"{type(err).__name__}: {err}"))

    url = os.environ.get(URL_ENV, "").strip()
    if os.environ.get(RECORD_ENV) == "1":
        if not url:
            raise RuntimeError(f"{RECORD_ENV}=1 needs {URL_ENV} (a MariaDB server to record from)")
        outcome = outcome_on_server(url, mysql, payload)
        with FileLock(RECORDED_FILE.with_suffix(".lock")):  # notebooks may record at once
            recorded = load_recorded()
            recorded["server"] = outcome.pop("server")
            recorded["entries"][key] = {"sql": mysql, "tables": payload, **outcome}
            RECORDED_FILE.write_text(json.dumps(recorded, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
    recorded = load_recorded()
    entry = recorded["entries"].get(key)
    if entry is not None:
        panels.append(_outcome_panel(entry, "MariaDB (recorded)"))
    elif url:
        outcome = outcome_on_server(url, mysql, payload)
        kind = "MariaDB" if "mariadb" in outcome.pop("server").lower() else "MySQL"
        panels.append(_outcome_panel(outcome, f"{kind} (live, {URL_ENV})"))
    else:
        panels.append(Panel("MySQL server", text=f"{NOT_RECORDED} (key {key}); set {URL_ENV} to ask a server"))
    for label, value in (pandas or {}).items():
        if isinstance(value, pd.Series):
            value = value.to_frame()
        if isinstance(value, pd.DataFrame):
            panels.append(Panel(label, frame=value, sql=False))
        else:
            panels.append(Panel(label, text=repr(value), sql=False))
    code = [("MySQL", mysql.strip())]
    if show_sql and duck_sql is not None and translation_differs(mysql, duck_sql):
        code.append(("DuckDB ran (the MySQL text as transpiled by sqlglot):", ";\n".join(duck_sql)))
    return SideBySide(panels, code=code if show_sql else [])


def translation_differs(mysql: str, statements: list[str]) -> bool:
    """Whether DuckDB ran something other than the MySQL text (beyond layout and sqlglot's reprint)."""
    ran = " ".join(";\n".join(statements).split())
    return ran not in {" ".join(mysql.split()), " ".join(mysql_normalised(mysql).split())}


def mysql_normalised(mysql: str) -> str:
    """The MySQL text as sqlglot prints it back (pretty): to tell a real translation from reformatting."""
    return "\n".join(format_sql(s, "mysql") for s in _parse_mysql(mysql))


