"""The 30 problems of LeetCode's "30 Days of Pandas" study plan, each solved twice (Part IV).

For every problem this module holds the one copy of

- the pandas solution: a function with LeetCode's name and signature;
- the MySQL solution: a string constant named after the function (`BIG_COUNTRIES_SQL`);
- a `Problem` entry in `PROBLEMS`: number, title, section, whether the result order matters,
  and the folder of its input tables in data/leetcode-pandas/ (schema.sql and one CSV per table;
  sub-folders hold extra cases).

The notebooks show the functions with `show`, and `solve` runs both solutions on the same
tables (pandas directly; the MySQL on DuckDB, or on the server in $BOOK_MYSQL_URL) and fails
unless the results agree. The tests run every problem the same way, and on MariaDB.
"""

from __future__ import annotations

import inspect
import re
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import pandas as pd

from booktools import sql
from booktools.paths import DATA_DIR

DATA = DATA_DIR / "leetcode-pandas"


# =============================================================== 1. Filtering and misc
def big_countries(world: pd.DataFrame) -> pd.DataFrame:
    big = (world["area"] >= 3_000_000) | (world["population"] >= 25_000_000)
    return world.loc[big, ["name", "population", "area"]]


BIG_COUNTRIES_SQL = """
SELECT name, population, area
FROM World
WHERE area >= 3000000 OR population >= 25000000
"""


def find_products(products: pd.DataFrame) -> pd.DataFrame:
    wanted = (products["low_fats"] == "Y") & (products["recyclable"] == "Y")
    return products.loc[wanted, ["product_id"]]


FIND_PRODUCTS_SQL = """
SELECT product_id
FROM Products
WHERE low_fats = 'Y' AND recyclable = 'Y'
"""


def find_customers(customers: pd.DataFrame, orders: pd.DataFrame) -> pd.DataFrame:
    never_ordered = ~customers["id"].isin(orders["customerId"])
    return customers.loc[never_ordered, ["name"]].rename(columns={"name": "Customers"})


FIND_CUSTOMERS_SQL = """
SELECT c.name AS Customers
FROM Customers AS c
LEFT JOIN Orders AS o ON o.customerId = c.id
WHERE o.id IS NULL
"""


def article_views(views: pd.DataFrame) -> pd.DataFrame:
    own = views.loc[views["author_id"] == views["viewer_id"], ["author_id"]]
    return own.drop_duplicates().sort_values("author_id").rename(columns={"author_id": "id"})


ARTICLE_VIEWS_SQL = """
SELECT DISTINCT author_id AS id
FROM Views
WHERE author_id = viewer_id
ORDER BY id
"""


# =============================================================== 2. String methods
def invalid_tweets(tweets: pd.DataFrame) -> pd.DataFrame:
    return tweets.loc[tweets["content"].str.len() > 15, ["tweet_id"]]


INVALID_TWEETS_SQL = """
SELECT tweet_id
FROM Tweets
WHERE CHAR_LENGTH(content) > 15
"""


def calculate_special_bonus(employees: pd.DataFrame) -> pd.DataFrame:
    eligible = (employees["employee_id"] % 2 == 1) & ~employees["name"].str.startswith("M")
    bonus = employees["salary"].where(eligible, 0)
    return employees[["employee_id"]].assign(bonus=bonus).sort_values("employee_id")


CALCULATE_SPECIAL_BONUS_SQL = """
SELECT employee_id,
       CASE WHEN employee_id % 2 = 1 AND name NOT LIKE 'M%' THEN salary ELSE 0 END AS bonus
FROM Employees
ORDER BY employee_id
"""


def fix_names(users: pd.DataFrame) -> pd.DataFrame:
    return users.assign(name=users["name"].str.capitalize()).sort_values("user_id")


FIX_NAMES_SQL = """
SELECT user_id, CONCAT(UPPER(LEFT(name, 1)), LOWER(SUBSTRING(name, 2))) AS name
FROM Users
ORDER BY user_id
"""


def valid_emails(users: pd.DataFrame) -> pd.DataFrame:
    valid = users["mail"].str.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*@leetcode\.com")
    return users.loc[valid]


VALID_EMAILS_SQL = """
SELECT user_id, name, mail
FROM Users
WHERE mail REGEXP '(?-i)^[A-Za-z][A-Za-z0-9_.-]*@leetcode[.]com$'
"""


def find_patients(patients: pd.DataFrame) -> pd.DataFrame:
    return patients.loc[patients["conditions"].str.contains(r"(?:^| )DIAB1")]


FIND_PATIENTS_SQL = """
SELECT patient_id, patient_name, conditions
FROM Patients
WHERE conditions LIKE 'DIAB1%' OR conditions LIKE '% DIAB1%'
"""


# =============================================================== 3. Data manipulation
def nth_highest_salary(employee: pd.DataFrame, N: int) -> pd.DataFrame:
    distinct = employee["salary"].drop_duplicates().sort_values(ascending=False)
    value = distinct.iloc[N - 1] if 1 <= N <= len(distinct) else None
    return pd.DataFrame({f"getNthHighestSalary({N})": pd.array([value], dtype="Int64")})


# LeetCode wants a stored function; {N} is filled in before the query runs (see the chapter).
NTH_HIGHEST_SALARY_SQL = """
SELECT (
    SELECT DISTINCT salary
    FROM (SELECT salary, DENSE_RANK() OVER (ORDER BY salary DESC) AS salary_rank
          FROM Employee) AS ranked
    WHERE salary_rank = {N}
) AS `getNthHighestSalary({N})`
"""

# LeetCode's own form of 177: a stored function (MySQL/MariaDB only; the MariaDB test runs it).
NTH_HIGHEST_SALARY_FUNCTION = """
CREATE FUNCTION getNthHighestSalary(N INT) RETURNS INT
BEGIN
    SET N = N - 1;
    RETURN (SELECT DISTINCT salary FROM Employee ORDER BY salary DESC LIMIT 1 OFFSET N);
END
"""


def second_highest_salary(employee: pd.DataFrame) -> pd.DataFrame:
    top_two = employee["salary"].drop_duplicates().nlargest(2)
    value = top_two.iloc[1] if len(top_two) == 2 else None
    return pd.DataFrame({"SecondHighestSalary": pd.array([value], dtype="Int64")})


SECOND_HIGHEST_SALARY_SQL = """
SELECT (
    SELECT DISTINCT salary
    FROM Employee
    ORDER BY salary DESC
    LIMIT 1 OFFSET 1
) AS SecondHighestSalary
"""


def department_highest_salary(employee: pd.DataFrame, department: pd.DataFrame) -> pd.DataFrame:
    is_top = employee["salary"] == employee.groupby("departmentId")["salary"].transform("max")
    top = employee.loc[is_top].merge(department, left_on="departmentId", right_on="id",
                                     suffixes=("_employee", "_department"))
    return top.rename(columns={"name_department": "Department", "name_employee": "Employee",
                               "salary": "Salary"})[["Department", "Employee", "Salary"]]


DEPARTMENT_HIGHEST_SALARY_SQL = """
SELECT Department, Employee, Salary
FROM (
    SELECT d.name AS Department, e.name AS Employee, e.salary AS Salary,
           RANK() OVER (PARTITION BY e.departmentId ORDER BY e.salary DESC) AS salary_rank
    FROM Employee AS e
    JOIN Department AS d ON d.id = e.departmentId
) AS ranked
WHERE salary_rank = 1
"""


def order_scores(scores: pd.DataFrame) -> pd.DataFrame:
    rank = scores["score"].rank(method="dense", ascending=False).astype("int64")
    return scores.assign(rank=rank).sort_values("score", ascending=False)[["score", "rank"]]


ORDER_SCORES_SQL = """
SELECT score, DENSE_RANK() OVER (ORDER BY score DESC) AS `rank`
FROM Scores
ORDER BY score DESC
"""


def delete_duplicate_emails(person: pd.DataFrame) -> None:
    # LeetCode checks `person` itself after the call, so rows must go in place. pandas 3.1
    # deprecates inplace=True for methods that change the shape (PDEP-8); we do it knowingly.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pd.errors.Pandas4Warning)
        person.sort_values("id", inplace=True)
        person.drop_duplicates(subset="email", keep="first", inplace=True)


DELETE_DUPLICATE_EMAILS_SQL = """
DELETE p
FROM Person AS p
JOIN Person AS keeper ON keeper.email = p.email AND keeper.id < p.id
"""


def rearrange_products_table(products: pd.DataFrame) -> pd.DataFrame:
    long = products.melt(id_vars="product_id", value_vars=["store1", "store2", "store3"],
                         var_name="store", value_name="price")
    return long.dropna(subset=["price"])


REARRANGE_PRODUCTS_TABLE_SQL = """
SELECT product_id, 'store1' AS store, store1 AS price FROM Products WHERE store1 IS NOT NULL
UNION ALL
SELECT product_id, 'store2', store2 FROM Products WHERE store2 IS NOT NULL
UNION ALL
SELECT product_id, 'store3', store3 FROM Products WHERE store3 IS NOT NULL
"""


# =============================================================== 4. Data statistics
def count_rich_customers(store: pd.DataFrame) -> pd.DataFrame:
    rich = store.loc[store["amount"] > 500, "customer_id"].nunique()
    return pd.DataFrame({"rich_count": [rich]})


COUNT_RICH_CUSTOMERS_SQL = """
SELECT COUNT(DISTINCT customer_id) AS rich_count
FROM Store
WHERE amount > 500
"""


def food_delivery(delivery: pd.DataFrame) -> pd.DataFrame:
    immediate = delivery["order_date"] == delivery["customer_pref_delivery_date"]
    return pd.DataFrame({"immediate_percentage": [round(100 * immediate.mean(), 2)]})


FOOD_DELIVERY_SQL = """
SELECT ROUND(100 * AVG(order_date = customer_pref_delivery_date), 2) AS immediate_percentage
FROM Delivery
"""


def users_percentage(users: pd.DataFrame, register: pd.DataFrame) -> pd.DataFrame:
    result = register.groupby("contest_id", as_index=False).agg(registered=("user_id", "nunique"))
    result["percentage"] = (100 * result["registered"] / len(users)).round(2)
    return result.sort_values(["percentage", "contest_id"], ascending=[False, True])[["contest_id", "percentage"]]


USERS_PERCENTAGE_SQL = """
SELECT contest_id,
       ROUND(100 * COUNT(user_id) / (SELECT COUNT(*) FROM Users), 2) AS percentage
FROM Register
GROUP BY contest_id
ORDER BY percentage DESC, contest_id
"""


# =============================================================== 5. Grouping
def queries_stats(queries: pd.DataFrame) -> pd.DataFrame:
    per_query = queries.assign(quality=queries["rating"] / queries["position"],
                               poor_query_percentage=100 * (queries["rating"] < 3))
    stats = per_query.groupby("query_name", as_index=False)[["quality", "poor_query_percentage"]].mean()
    return stats.round(2)


QUERIES_STATS_SQL = """
SELECT query_name,
       ROUND(AVG(rating / position), 2) AS quality,
       ROUND(100 * AVG(rating < 3), 2) AS poor_query_percentage
FROM Queries
GROUP BY query_name
"""


def sales_analysis(product: pd.DataFrame, sales: pd.DataFrame) -> pd.DataFrame:
    dates = sales.groupby("product_id")["sale_date"].agg(["min", "max"])
    only_q1 = dates.index[(dates["min"] >= "2019-01-01") & (dates["max"] <= "2019-03-31")]
    return product.loc[product["product_id"].isin(only_q1), ["product_id", "product_name"]]


SALES_ANALYSIS_SQL = """
SELECT p.product_id, p.product_name
FROM Product AS p
JOIN Sales AS s ON s.product_id = p.product_id
GROUP BY p.product_id, p.product_name
HAVING MIN(s.sale_date) >= '2019-01-01' AND MAX(s.sale_date) <= '2019-03-31'
"""


def count_unique_subjects(teacher: pd.DataFrame) -> pd.DataFrame:
    return teacher.groupby("teacher_id", as_index=False).agg(cnt=("subject_id", "nunique"))


COUNT_UNIQUE_SUBJECTS_SQL = """
SELECT teacher_id, COUNT(DISTINCT subject_id) AS cnt
FROM Teacher
GROUP BY teacher_id
"""


def find_classes(courses: pd.DataFrame) -> pd.DataFrame:
    size = courses.groupby("class", as_index=False).agg(students=("student", "nunique"))
    return size.loc[size["students"] >= 5, ["class"]]


FIND_CLASSES_SQL = """
SELECT class
FROM Courses
GROUP BY class
HAVING COUNT(DISTINCT student) >= 5
"""


def largest_orders(orders: pd.DataFrame) -> pd.DataFrame:
    top = orders["customer_number"].value_counts().index[:1]
    return pd.DataFrame({"customer_number": top})


LARGEST_ORDERS_SQL = """
SELECT customer_number
FROM Orders
GROUP BY customer_number
ORDER BY COUNT(*) DESC
LIMIT 1
"""


def categorize_products(activities: pd.DataFrame) -> pd.DataFrame:
    by_date = activities.groupby("sell_date")["product"]
    result = by_date.agg(num_sold="nunique", products=lambda p: ",".join(sorted(p.unique())))
    return result.reset_index().sort_values("sell_date")


CATEGORIZE_PRODUCTS_SQL = """
SELECT sell_date,
       COUNT(DISTINCT product) AS num_sold,
       GROUP_CONCAT(DISTINCT product ORDER BY product SEPARATOR ',') AS products
FROM Activities
GROUP BY sell_date
ORDER BY sell_date
"""


def daily_leads_and_partners(daily_sales: pd.DataFrame) -> pd.DataFrame:
    return daily_sales.groupby(["date_id", "make_name"], as_index=False).agg(
        unique_leads=("lead_id", "nunique"), unique_partners=("partner_id", "nunique"))


DAILY_LEADS_AND_PARTNERS_SQL = """
SELECT date_id, make_name,
       COUNT(DISTINCT lead_id) AS unique_leads,
       COUNT(DISTINCT partner_id) AS unique_partners
FROM DailySales
GROUP BY date_id, make_name
"""


def actors_and_directors(actor_director: pd.DataFrame) -> pd.DataFrame:
    films = actor_director.groupby(["actor_id", "director_id"]).size().reset_index(name="films")
    return films.loc[films["films"] >= 3, ["actor_id", "director_id"]]


ACTORS_AND_DIRECTORS_SQL = """
SELECT actor_id, director_id
FROM ActorDirector
GROUP BY actor_id, director_id
HAVING COUNT(*) >= 3
"""


# =============================================================== 6. Merging
def replace_employee_id(employees: pd.DataFrame, employee_uni: pd.DataFrame) -> pd.DataFrame:
    return employees.merge(employee_uni, on="id", how="left")[["unique_id", "name"]]


REPLACE_EMPLOYEE_ID_SQL = """
SELECT u.unique_id, e.name
FROM Employees AS e
LEFT JOIN EmployeeUNI AS u ON u.id = e.id
"""


def students_and_examinations(students: pd.DataFrame, subjects: pd.DataFrame,
                              examinations: pd.DataFrame) -> pd.DataFrame:
    every_pair = students.merge(subjects, how="cross")
    taken = examinations.groupby(["student_id", "subject_name"]).size().reset_index(name="attended_exams")
    result = every_pair.merge(taken, on=["student_id", "subject_name"], how="left")
    result["attended_exams"] = result["attended_exams"].fillna(0).astype("int64")
    return result.sort_values(["student_id", "subject_name"])


STUDENTS_AND_EXAMINATIONS_SQL = """
SELECT s.student_id, s.student_name, sub.subject_name, COUNT(e.student_id) AS attended_exams
FROM Students AS s
CROSS JOIN Subjects AS sub
LEFT JOIN Examinations AS e
       ON e.student_id = s.student_id AND e.subject_name = sub.subject_name
GROUP BY s.student_id, s.student_name, sub.subject_name
ORDER BY s.student_id, sub.subject_name
"""


def find_managers(employee: pd.DataFrame) -> pd.DataFrame:
    reports = employee.groupby("managerId").size()
    return employee.loc[employee["id"].isin(reports.index[reports >= 5]), ["name"]]


FIND_MANAGERS_SQL = """
SELECT m.name
FROM Employee AS m
JOIN Employee AS e ON e.managerId = m.id
GROUP BY m.id, m.name
HAVING COUNT(*) >= 5
"""


def count_salary_categories(accounts: pd.DataFrame) -> pd.DataFrame:
    income = accounts["income"]
    counts = {
        "Low Salary": (income < 20000).sum(),
        "Average Salary": income.between(20000, 50000).sum(),
        "High Salary": (income > 50000).sum(),
    }
    return pd.DataFrame({"category": list(counts), "accounts_count": list(counts.values())})


COUNT_SALARY_CATEGORIES_SQL = """
SELECT 'Low Salary' AS category, COUNT(*) AS accounts_count FROM Accounts WHERE income < 20000
UNION ALL
SELECT 'Average Salary', COUNT(*) FROM Accounts WHERE income BETWEEN 20000 AND 50000
UNION ALL
SELECT 'High Salary', COUNT(*) FROM Accounts WHERE income > 50000
"""


# ============================================================================ the registry
SECTIONS = {
    1: "Filtering and misc",
    2: "String methods",
    3: "Data manipulation",
    4: "Data statistics",
    5: "Grouping",
    6: "Merging",
}


def snake_case(table_name: str) -> str:
    """LeetCode's argument name for a table: World -> world, EmployeeUNI -> employee_uni."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", table_name).lower()


@dataclass(frozen=True)
class Problem:
    number: int
    title: str
    section: int
    solution: Callable
    mysql: str
    ordered: bool = False  # the problem prescribes the row order (the SQL has ORDER BY)
    modifies: str | None = None  # the solution changes this table in place (SQL: DELETE)
    params: tuple[dict, ...] = ({},)  # parameter sets for solution and SQL; the first is the default

    @property
    def name(self) -> str:
        return self.solution.__name__

    @cached_property
    def folder(self) -> Path:
        (found,) = DATA.glob(f"{self.number:04d}-*/")
        return found

    @property
    def slug(self) -> str:
        return self.folder.name[5:]

    @property
    def url(self) -> str:
        return f"https://leetcode.com/problems/{self.slug}/"

    @cached_property
    def schemas(self) -> dict[str, sql.TableSchema]:
        return sql.parse_schema((self.folder / "schema.sql").read_text(encoding="utf-8"))

    @property
    def cases(self) -> list[str]:
        """Names of the extra input cases (sub-folders); the main case is ""."""
        return [""] + sorted(p.name for p in self.folder.iterdir() if p.is_dir())

    def tables(self, case: str = "", string_dtype: str = "str") -> dict[str, pd.DataFrame]:
        """The input tables, in the order of the solution's arguments."""
        where = self.folder / case
        return {name: sql.read_csv_table(where / f"{name}.csv", schema, string_dtype)
                for name, schema in self.schemas.items()}

    def sql_text(self, params: dict | None = None) -> str:
        params = self.params[0] if params is None else params
        text = self.mysql.strip()
        if params:
            if not all(isinstance(v, int) for v in params.values()):
                raise TypeError(f"parameters must be integers, got {params}")
            text = text.format(**params)
        return text

    def run_pandas(self, tables: dict[str, pd.DataFrame], params: dict | None = None) -> pd.DataFrame:
        params = self.params[0] if params is None else params
        args = {name: frame.copy() for name, frame in tables.items()}
        result = self.solution(*args.values(), **params)
        if self.modifies is not None:
            if result is not None:
                raise TypeError(f"{self.name} must modify its argument in place and return None")
            return args[self.modifies]
        return result

    def run_sql(self, tables: dict[str, pd.DataFrame], params: dict | None = None,
                engine: sql.Engine | None = None) -> tuple[pd.DataFrame, list[str]]:
        """The SQL result and the statements the engine actually ran."""
        own = engine is None
        engine = sql.open_engine() if own else engine
        try:
            engine.load(tables, self.schemas)
            result = engine.execute(self.sql_text(params))
            ran = engine.last_statements
            if self.modifies is not None:
                result = engine.table(self.modifies)
            return result, ran
        finally:
            if own:
                engine.close()


PROBLEMS = [
    Problem(595, "Big Countries", 1, big_countries, BIG_COUNTRIES_SQL),
    Problem(1757, "Recyclable and Low Fat Products", 1, find_products, FIND_PRODUCTS_SQL),
    Problem(183, "Customers Who Never Order", 1, find_customers, FIND_CUSTOMERS_SQL),
    Problem(1148, "Article Views I", 1, article_views, ARTICLE_VIEWS_SQL, ordered=True),
    Problem(1683, "Invalid Tweets", 2, invalid_tweets, INVALID_TWEETS_SQL),
    Problem(1873, "Calculate Special Bonus", 2, calculate_special_bonus, CALCULATE_SPECIAL_BONUS_SQL,
            ordered=True),
    Problem(1667, "Fix Names in a Table", 2, fix_names, FIX_NAMES_SQL, ordered=True),
    Problem(1517, "Find Users With Valid E-Mails", 2, valid_emails, VALID_EMAILS_SQL),
    Problem(1527, "Patients With a Condition", 2, find_patients, FIND_PATIENTS_SQL),
    Problem(177, "Nth Highest Salary", 3, nth_highest_salary, NTH_HIGHEST_SALARY_SQL,
            params=({"N": 2}, {"N": 1}, {"N": 3}, {"N": 4}, {"N": 0})),
    Problem(176, "Second Highest Salary", 3, second_highest_salary, SECOND_HIGHEST_SALARY_SQL),
    Problem(184, "Department Highest Salary", 3, department_highest_salary, DEPARTMENT_HIGHEST_SALARY_SQL),
    Problem(178, "Rank Scores", 3, order_scores, ORDER_SCORES_SQL, ordered=True),
    Problem(196, "Delete Duplicate Emails", 3, delete_duplicate_emails, DELETE_DUPLICATE_EMAILS_SQL,
            modifies="Person"),
    Problem(1795, "Rearrange Products Table", 3, rearrange_products_table, REARRANGE_PRODUCTS_TABLE_SQL),
    Problem(2082, "The Number of Rich Customers", 4, count_rich_customers, COUNT_RICH_CUSTOMERS_SQL),
    Problem(1173, "Immediate Food Delivery I", 4, food_delivery, FOOD_DELIVERY_SQL),
    Problem(1633, "Percentage of Users Attended a Contest", 4, users_percentage, USERS_PERCENTAGE_SQL,
            ordered=True),
    Problem(1211, "Queries Quality and Percentage", 5, queries_stats, QUERIES_STATS_SQL),
    Problem(1084, "Sales Analysis III", 5, sales_analysis, SALES_ANALYSIS_SQL),
    Problem(2356, "Number of Unique Subjects Taught by Each Teacher", 5, count_unique_subjects,
            COUNT_UNIQUE_SUBJECTS_SQL),
    Problem(596, "Classes More Than 5 Students", 5, find_classes, FIND_CLASSES_SQL),
    Problem(586, "Customer Placing the Largest Number of Orders", 5, largest_orders, LARGEST_ORDERS_SQL),
    Problem(1484, "Group Sold Products By The Date", 5, categorize_products, CATEGORIZE_PRODUCTS_SQL,
            ordered=True),
    Problem(1693, "Daily Leads and Partners", 5, daily_leads_and_partners, DAILY_LEADS_AND_PARTNERS_SQL),
    Problem(1050, "Actors and Directors Who Cooperated At Least Three Times", 5, actors_and_directors,
            ACTORS_AND_DIRECTORS_SQL),
    Problem(1378, "Replace Employee ID With The Unique Identifier", 6, replace_employee_id,
            REPLACE_EMPLOYEE_ID_SQL),
    Problem(1280, "Students and Examinations", 6, students_and_examinations, STUDENTS_AND_EXAMINATIONS_SQL,
            ordered=True),
    Problem(570, "Managers with at Least 5 Direct Reports", 6, find_managers, FIND_MANAGERS_SQL),
    Problem(1907, "Count Salary Categories", 6, count_salary_categories, COUNT_SALARY_CATEGORIES_SQL),
]
_BY_KEY = {p.name: p for p in PROBLEMS} | {p.number: p for p in PROBLEMS}


def get(key: str | int | Problem) -> Problem:
    """A problem by its pandas function name (or the function itself) or its LeetCode number."""
    if isinstance(key, Problem):
        return key
    if callable(key):
        key = key.__name__
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no problem {key!r} among the 30; names: {', '.join(p.name for p in PROBLEMS)}") from None


def tables(key, case: str = "") -> dict[str, pd.DataFrame]:
    return get(key).tables(case)


# ============================================================================ notebook views
def show(key):
    """Display both solutions of a problem: the pandas function and the MySQL text."""
    from IPython.display import Code, display

    from booktools.source import show_source

    problem = get(key)
    display(show_source(problem.solution))
    display(Code(problem.mysql.strip(), language="sql"))


def show_tables(key, case: str = "") -> sql.SideBySide:
    """The input tables of a problem, next to each other."""
    problem = get(key)
    frames = problem.tables(case)
    return sql.SideBySide([sql.Panel(f"{name}  ({len(frame)} rows)", frame=frame, sql=False)
                           for name, frame in frames.items()])


def _signature_call(problem: Problem, params: dict) -> str:
    names = list(inspect.signature(problem.solution).parameters)
    shown = [f"{n}={params[n]}" if n in params else n for n in names]
    return f"{problem.name}({', '.join(shown)})"


def solve(key, case: str = "", params: dict | None = None,
          tables: dict[str, pd.DataFrame] | None = None) -> sql.SideBySide:
    """Run both solutions on the same input, show both results, and fail unless they agree.

    Rows are compared as a multiset unless the problem prescribes an order. Unordered results
    are displayed sorted, so that the page is the same on every run and every engine.
    """
    problem = get(key)
    params = problem.params[0] if params is None else params
    inputs = problem.tables(case) if tables is None else tables
    expected = problem.run_pandas(inputs, params)
    with sql.open_engine() as engine:
        got, ran = problem.run_sql(inputs, params, engine)
        label = engine.label
    sql.assert_same_result(expected, got, ordered=problem.ordered, names=("pandas", label))
    shown = (lambda f: f) if problem.ordered else sql.sorted_for_display
    what = problem.modifies or "result"
    panels = [
        sql.Panel(f"pandas: {_signature_call(problem, params)}" + (f" -> {what}" if problem.modifies else ""),
                  frame=shown(expected.reset_index(drop=True)), sql=False),
        sql.Panel(f"MySQL on {label}" + (f" -> {what}" if problem.modifies else ""), frame=shown(got)),
    ]
    code = []
    if isinstance(engine, sql.DuckDBEngine) and sql.translation_differs(problem.sql_text(params), ran):
        code.append(("DuckDB ran (the MySQL text as transpiled by sqlglot):", ";\n".join(ran)))
    order = "in the prescribed order" if problem.ordered else "as multisets of rows (SQL sets no order; shown sorted)"
    return sql.SideBySide(panels, code=code, notes=[f"Same columns and rows, compared {order}."])
