"""A small, deterministic TPC-H data generator, and the refresh rounds, all through SQL.

``Tpch(seed)`` draws a database of about scale factor 0.001 (5 regions, 25 nations,
10 suppliers, 200 parts, 800 partsupp, 150 customers, 1500 orders, ~6000 lineitems) with
TPC-H's vocabularies and value rules (dates 1992-1998, return flags and line status from the
dates, order status and total price from the lines, a third of the customers without orders).
A few rows are planted so that every one of the 22 queries, at its validation parameters,
returns rows on so little data: parts of size 15 in BRASS, Brand#23 MED BOX parts,
ECONOMY ANODIZED STEEL parts, 'forest' parts, parts for each branch of Q19, orders of seven
big lines (Q18), and suppliers in the nations the queries name.

The refresh functions produce SQL statements for ``Project.sql``:

- ``rf1()``: new orders, each with 1 to 7 lineitems (one multi-row INSERT per table);
- ``rf2()``: deletes old orders and their lineitems;
- ``updates(round)``: random UPDATEs that move rows between groups and join partners,
  set values to NULL and back, and push orders across Q18's threshold.

Everything is drawn from one ``random.Random(seed)``: the same seed gives the same SQL.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterable
from decimal import Decimal

REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATIONS = [
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
]
NATION_KEY = {name: key for key, (name, _) in enumerate(NATIONS)}
SEGMENTS = ["AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"]
PRIORITIES = ["1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"]
SHIP_MODES = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"]
INSTRUCTIONS = ["DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"]
TYPE_SYLLABLES = (
    ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"],
    ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"],
    ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"],
)
CONTAINER_SYLLABLES = (
    ["SM", "LG", "MED", "JUMBO", "WRAP"],
    ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"],
)
COLORS = [
    "almond",
    "antique",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanched",
    "blue",
    "blush",
    "brown",
    "burlywood",
    "burnished",
    "chartreuse",
    "chiffon",
    "chocolate",
    "coral",
    "cornflower",
    "cornsilk",
    "cream",
    "cyan",
    "dark",
    "deep",
    "dim",
    "dodger",
    "drab",
    "firebrick",
    "floral",
    "forest",
    "frosted",
    "gainsboro",
    "ghost",
    "goldenrod",
    "green",
    "grey",
    "honeydew",
    "hot",
    "indian",
    "ivory",
    "khaki",
    "lace",
    "lavender",
    "lawn",
    "lemon",
    "light",
    "lime",
    "linen",
    "magenta",
    "maroon",
    "medium",
    "metallic",
    "midnight",
    "mint",
    "misty",
    "moccasin",
    "navajo",
    "navy",
    "olive",
    "orange",
    "orchid",
    "pale",
    "papaya",
    "peach",
    "peru",
    "pink",
    "plum",
    "powder",
    "puff",
    "purple",
    "red",
    "rose",
    "rosy",
    "royal",
    "saddle",
    "salmon",
    "sandy",
    "seashell",
    "sienna",
    "sky",
    "slate",
    "smoke",
    "snow",
    "spring",
    "steel",
    "tan",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "yellow",
]
assert len(COLORS) == 92
WORDS = [
    "furiously",
    "carefully",
    "blithely",
    "quickly",
    "slyly",
    "final",
    "regular",
    "express",
    "pending",
    "ironic",
    "bold",
    "even",
    "silent",
    "unusual",
    "deposits",
    "packages",
    "accounts",
    "foxes",
    "ideas",
    "theodolites",
    "instructions",
    "dependencies",
    "excuses",
    "platelets",
    "asymptotes",
    "courts",
    "dolphins",
    "sleep",
    "wake",
    "haggle",
    "nag",
    "use",
    "boost",
    "affix",
    "detect",
    "integrate",
    "cajole",
    "among",
    "across",
    "above",
    "after",
    "along",
    "against",
]

START_DATE = dt.date(1992, 1, 1)
LAST_ORDER_DATE = dt.date(1998, 8, 2)  # ENDDATE - 151 days
CURRENT_DATE = dt.date(1995, 6, 17)
ORDER_DAYS = (LAST_ORDER_DATE - START_DATE).days

# Planted rows: suppliers in the nations the queries name (Q2 EUROPE, Q5 ASIA, Q7 FRANCE and
# GERMANY, Q8 BRAZIL, Q11 GERMANY, Q20 CANADA, Q21 SAUDI ARABIA).
SUPPLIER_NATIONS = [
    "GERMANY",
    "FRANCE",
    "CANADA",
    "SAUDI ARABIA",
    "BRAZIL",
    "INDIA",
    "JAPAN",
    "CHINA",
    "UNITED KINGDOM",
    "SAUDI ARABIA",
]
COMPLAINTS_SUPPLIER = 6  # its comment holds 'Customer ... Complaints' (Q16's NOT IN)

BATCH = 1000  # rows per INSERT statement


def sql_literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, Decimal):
        return f"CAST('{value}' AS DECIMAL(15,2))"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def inserts(table: str, rows: list[tuple]) -> list[str]:
    """Multi-row INSERT ... VALUES statements, at most ``BATCH`` rows each."""
    return [
        f"INSERT INTO {table} VALUES "
        + ", ".join(
            "(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows[i : i + BATCH]
        )
        for i in range(0, len(rows), BATCH)
    ]


def in_list(values: Iterable[int]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ")"


def money(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


class Tpch:
    """The generator: the initial database, then refresh rounds, all as SQL statements."""

    def __init__(
        self,
        seed: int = 2024,
        customers: int = 150,
        orders: int = 1500,
        parts: int = 200,
        suppliers: int = 10,
    ):
        self.rng = random.Random(seed)
        self.n_customers, self.n_orders, self.n_parts, self.n_suppliers = (
            customers,
            orders,
            parts,
            suppliers,
        )
        self.part_suppliers: dict[int, list[int]] = {}
        self.retail_price: dict[int, Decimal] = {}
        self.live_orders: list[int] = []
        self.big_orders: list[int] = []  # orders of seven lines (Q18's candidates)
        self.next_orderkey = 1

    # text ------------------------------------------------------------------------------------

    def comment(self, low: int = 3, high: int = 8) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(low, high)))

    def comment_with(self, first: str, second: str) -> str:
        """A comment holding ``first`` and, later, ``second`` (Q13's and Q16's patterns)."""
        return f"{self.comment(1, 3)} {first} {self.comment(1, 2)} {second} {self.comment(1, 2)}"

    def order_comment(self) -> str:
        roll = self.rng.random()
        if roll < 0.12:
            return self.comment_with("special", "requests")
        if roll < 0.18:  # only one of the two words, or in the wrong order
            return self.rng.choice(
                [self.comment_with("requests", "special"), f"{self.comment()} special"]
            )
        return self.comment()

    # initial database ------------------------------------------------------------------------

    def initial(self) -> list[str]:
        """INSERT statements that fill all eight tables."""
        statements = []
        statements += inserts(
            "region", [(k, name, self.comment()) for k, name in enumerate(REGIONS)]
        )
        statements += inserts(
            "nation",
            [(k, name, region, self.comment()) for k, (name, region) in enumerate(NATIONS)],
        )
        statements += inserts("supplier", self.suppliers())
        parts = self.parts()
        statements += inserts("part", parts)
        statements += inserts("partsupp", self.partsupps())
        statements += inserts("customer", self.customers())
        orders, lines = [], []
        big = set(self.rng.sample(range(self.n_orders), 4))  # Q18: orders over 300 units
        for i in range(self.n_orders):
            order, order_lines = self.order(big=i in big)
            orders.append(order)
            lines += order_lines
        statements += inserts("orders", orders)
        statements += inserts("lineitem", lines)
        return statements

    def suppliers(self) -> list[tuple]:
        rows = []
        for key in range(1, self.n_suppliers + 1):
            nation = NATION_KEY[SUPPLIER_NATIONS[(key - 1) % len(SUPPLIER_NATIONS)]]
            if key == COMPLAINTS_SUPPLIER:
                comment = self.comment_with("Customer", "Complaints")
            elif key == COMPLAINTS_SUPPLIER + 1:
                comment = self.comment_with("Customer", "Recommends")
            else:
                comment = self.comment()
            rows.append(
                (
                    key,
                    f"Supplier#{key:09d}",
                    self.comment(1, 3),
                    nation,
                    self.phone(nation),
                    money(self.rng.randint(-99999, 999999)),
                    comment,
                )
            )
        return rows

    def phone(self, nation: int) -> str:
        r = self.rng
        return f"{nation + 10}-{r.randint(100, 999)}-{r.randint(100, 999)}-{r.randint(1000, 9999)}"

    def parts(self) -> list[tuple]:
        r = self.rng
        keys = list(range(1, self.n_parts + 1))
        planted = r.sample(keys, 24)
        roles = {}
        for i, key in enumerate(planted):
            roles[key] = ["q2", "q17", "q8", "q20", "q19a", "q19b", "q19c", "q16"][i // 3]
        rows = []
        for key in keys:
            role = roles.get(key)
            colors = r.sample(COLORS, 5)
            if role == "q20" and "forest" not in colors[:1]:
                colors = ["forest"] + [c for c in colors if c != "forest"][:4]
            m, n = r.randint(1, 5), r.randint(1, 5)
            syllables = [r.choice(s) for s in TYPE_SYLLABLES]
            size = r.randint(1, 50)
            container = [r.choice(s) for s in CONTAINER_SYLLABLES]
            if role == "q2":
                size, syllables[2] = 15, "BRASS"
            elif role == "q17":
                m, n, container, size = 2, 3, ["MED", "BOX"], r.randint(1, 10)
            elif role == "q8":
                syllables = ["ECONOMY", "ANODIZED", "STEEL"]
            elif role == "q19a":
                m, n, container, size = (
                    1,
                    2,
                    ["SM", r.choice(["CASE", "BOX", "PACK", "PKG"])],
                    r.randint(1, 5),
                )
            elif role == "q19b":
                m, n, container, size = (
                    2,
                    3,
                    ["MED", r.choice(["BAG", "BOX", "PKG", "PACK"])],
                    r.randint(1, 10),
                )
            elif role == "q19c":
                m, n, container, size = (
                    3,
                    4,
                    ["LG", r.choice(["CASE", "BOX", "PACK", "PKG"])],
                    r.randint(1, 15),
                )
            elif role == "q16":
                syllables[0:2] = ["MEDIUM", "POLISHED"]
                size = r.choice([49, 14, 23, 45, 19, 3, 36, 9])
            price = money(90000 + (key // 10) % 20001 + 100 * (key % 1000))
            self.retail_price[key] = price
            rows.append(
                (
                    key,
                    " ".join(colors),
                    f"Manufacturer#{m}",
                    f"Brand#{m}{n}",
                    " ".join(syllables),
                    size,
                    " ".join(container),
                    price,
                    self.comment(1, 4),
                )
            )
        return rows

    def partsupps(self) -> list[tuple]:
        rows = []
        for part in range(1, self.n_parts + 1):
            suppliers = self.rng.sample(range(1, self.n_suppliers + 1), 4)
            self.part_suppliers[part] = suppliers
            for supplier in suppliers:
                rows.append(
                    (
                        part,
                        supplier,
                        self.rng.randint(1, 9999),
                        money(self.rng.randint(100, 100000)),
                        self.comment(),
                    )
                )
        return rows

    def customers(self) -> list[tuple]:
        rows = []
        for key in range(1, self.n_customers + 1):
            nation = self.rng.randrange(len(NATIONS))
            rows.append(
                (
                    key,
                    f"Customer#{key:09d}",
                    self.comment(1, 3),
                    nation,
                    self.phone(nation),
                    money(self.rng.randint(-99999, 999999)),
                    self.rng.choice(SEGMENTS),
                    self.comment(),
                )
            )
        return rows

    def order(self, big: bool = False, date: dt.date | None = None) -> tuple[tuple, list[tuple]]:
        """One order and its lineitems; customers whose key is a multiple of 3 never order."""
        r = self.rng
        key = self.next_orderkey
        self.next_orderkey += 1
        self.live_orders.append(key)
        customer = r.choice([c for c in range(1, self.n_customers + 1) if c % 3 != 0])
        date = date or START_DATE + dt.timedelta(days=r.randint(0, ORDER_DAYS))
        lines, total, statuses = [], Decimal(0), set()
        count = 7 if big else r.randint(1, 7)
        if big:
            self.big_orders.append(key)
        for number in range(1, count + 1):
            part = r.randint(1, self.n_parts)
            supplier = r.choice(self.part_suppliers[part])
            quantity = r.randint(44, 50) if big else r.randint(1, 50)
            price = self.retail_price[part] * quantity
            discount, tax = money(r.randint(0, 10)), money(r.randint(0, 8))
            ship = date + dt.timedelta(days=r.randint(1, 121))
            commit = date + dt.timedelta(days=r.randint(30, 90))
            receipt = ship + dt.timedelta(days=r.randint(1, 30))
            flag = r.choice("RA") if receipt <= CURRENT_DATE else "N"
            status = "O" if ship > CURRENT_DATE else "F"
            statuses.add(status)
            total += (price * (1 + tax) * (1 - discount)).quantize(Decimal("0.01"))
            lines.append(
                (
                    key,
                    part,
                    supplier,
                    number,
                    Decimal(quantity).quantize(Decimal("0.01")),
                    price,
                    discount,
                    tax,
                    flag,
                    status,
                    ship,
                    commit,
                    receipt,
                    r.choice(INSTRUCTIONS),
                    r.choice(SHIP_MODES),
                    self.comment(2, 5),
                )
            )
        order_status = statuses.pop() if len(statuses) == 1 else "P"
        order = (
            key,
            customer,
            order_status,
            total,
            date,
            r.choice(PRIORITIES),
            f"Clerk#{r.randint(1, 1000):09d}",
            0,
            self.order_comment(),
        )
        return order, lines

    # refresh functions -----------------------------------------------------------------------

    def rf1(self, count: int = 15) -> list[str]:
        """RF1: ``count`` new orders (one of them of seven big lines) with their lineitems."""
        orders, lines = [], []
        for i in range(count):
            order, order_lines = self.order(big=i == 0)
            orders.append(order)
            lines += order_lines
        return inserts("orders", orders) + inserts("lineitem", lines)

    def rf2(self, count: int = 15) -> list[str]:
        """RF2: delete ``count`` old orders (one big one among them) and their lineitems."""
        old = [k for k in self.live_orders if k not in self.big_orders]
        victims = self.rng.sample(old, count - 1)
        if self.big_orders:
            victims.append(self.big_orders.pop(0))
        for key in victims:
            self.live_orders.remove(key)
        keys = in_list(sorted(victims))
        return [
            f"DELETE FROM orders WHERE o_orderkey IN {keys}",
            f"DELETE FROM lineitem WHERE l_orderkey IN {keys}",
        ]

    def updates(self, round_: int, count: int = 12) -> list[str]:
        """Random UPDATEs (``count`` of them), plus one scripted change per round: round 1
        pushes an order over Q18's 300 units, round 2 gives the complaining supplier a NULL
        key (Q16's NOT IN becomes never true), round 3 gives it its key back."""
        r = self.rng
        pool = [
            self.u_quantity,
            self.u_price,
            self.u_returnflag,
            self.u_discount,
            self.u_shipdate,
            self.u_line_supplier,
            self.u_line_part,
            self.u_orderstatus,
            self.u_order_customer,
            self.u_order_date,
            self.u_order_comment,
            self.u_supplycost,
            self.u_acctbal,
            self.u_segment,
            self.u_customer_nation,
            self.u_part_size,
            self.u_part_kind,
            self.u_supplier_nation,
            self.u_nation_region,
            self.u_availqty,
        ]
        statements = [r.choice(pool)() for _ in range(count)]
        if round_ == 1:
            key = r.choice([k for k in self.live_orders if k not in self.big_orders][:200])
            statements.append(
                f"UPDATE lineitem SET l_quantity = l_quantity + 60 WHERE l_orderkey = {key}"
            )
        elif round_ == 2:
            statements.append(
                f"UPDATE supplier SET s_suppkey = NULL WHERE s_suppkey = {COMPLAINTS_SUPPLIER}"
            )
        elif round_ == 3:
            statements.append(
                f"UPDATE supplier SET s_suppkey = {COMPLAINTS_SUPPLIER} WHERE s_suppkey IS NULL"
            )
        return statements

    def some_orders(self) -> str:
        """A condition on an order key picking about 1 order in 40."""
        return f"% 40 = {self.rng.randrange(40)}"

    def u_quantity(self) -> str:
        delta = self.rng.choice([-5, 3, 10, 25])
        return f"UPDATE lineitem SET l_quantity = greatest(l_quantity + {delta}, 1) WHERE l_orderkey {self.some_orders()}"

    def u_price(self) -> str:
        factor = self.rng.choice(["1.10", "0.95"])
        return (
            f"UPDATE lineitem SET l_extendedprice = CAST(l_extendedprice * {factor} AS DECIMAL(15,2)) "
            f"WHERE l_orderkey {self.some_orders()}"
        )

    def u_returnflag(self) -> str:
        flag = self.rng.choice(["'R'", "'A'", "'N'", "NULL"])
        return f"UPDATE lineitem SET l_returnflag = {flag} WHERE l_orderkey {self.some_orders()}"

    def u_discount(self) -> str:
        discount = self.rng.choice(["0.06", "0.05", "0.00", "NULL"])
        return f"UPDATE lineitem SET l_discount = {discount} WHERE l_orderkey {self.some_orders()} AND l_linenumber <= 2"

    def u_shipdate(self) -> str:
        days = self.rng.choice([-200, -40, 30, 365])
        return (
            f"UPDATE lineitem SET l_shipdate = date_add(l_shipdate, {days}), "
            f"l_receiptdate = date_add(l_receiptdate, {days}) WHERE l_orderkey {self.some_orders()}"
        )

    def u_line_supplier(self) -> str:
        supplier = self.rng.choice([str(self.rng.randint(1, self.n_suppliers)), "NULL"])
        return f"UPDATE lineitem SET l_suppkey = {supplier} WHERE l_orderkey {self.some_orders()} AND l_linenumber = 1"

    def u_line_part(self) -> str:
        part = self.rng.randint(1, self.n_parts)
        return f"UPDATE lineitem SET l_partkey = {part} WHERE l_orderkey {self.some_orders()} AND l_linenumber = 2"

    def u_orderstatus(self) -> str:
        status = self.rng.choice(["'F'", "'O'", "'P'", "NULL"])
        return f"UPDATE orders SET o_orderstatus = {status} WHERE o_orderkey {self.some_orders()}"

    def u_order_customer(self) -> str:
        customer = self.rng.choice([str(self.rng.randint(1, self.n_customers)), "NULL"])
        return f"UPDATE orders SET o_custkey = {customer} WHERE o_orderkey {self.some_orders()}"

    def u_order_date(self) -> str:
        days = self.rng.choice([-90, 45, 400])
        return f"UPDATE orders SET o_orderdate = date_add(o_orderdate, {days}) WHERE o_orderkey {self.some_orders()}"

    def u_order_comment(self) -> str:
        comment = sql_literal(self.order_comment())
        return f"UPDATE orders SET o_comment = {comment}, o_orderpriority = '{self.rng.choice(PRIORITIES)}' WHERE o_orderkey {self.some_orders()}"

    def u_supplycost(self) -> str:
        cost = self.rng.choice(
            ["CAST(ps_supplycost * 0.5 AS DECIMAL(15,2))", "ps_supplycost + 100", "NULL", "1.00"]
        )
        return f"UPDATE partsupp SET ps_supplycost = {cost} WHERE ps_partkey % 13 = {self.rng.randrange(13)}"

    def u_availqty(self) -> str:
        qty = self.rng.choice(["1", "ps_availqty + 500", "NULL"])
        return f"UPDATE partsupp SET ps_availqty = {qty} WHERE ps_partkey % 11 = {self.rng.randrange(11)}"

    def u_acctbal(self) -> str:
        balance = self.rng.choice(["c_acctbal + 2500", "-c_acctbal", "NULL", "0.00"])
        return f"UPDATE customer SET c_acctbal = {balance} WHERE c_custkey % 9 = {self.rng.randrange(9)}"

    def u_segment(self) -> str:
        return f"UPDATE customer SET c_mktsegment = '{self.rng.choice(SEGMENTS)}' WHERE c_custkey % 11 = {self.rng.randrange(11)}"

    def u_customer_nation(self) -> str:
        nation = self.rng.randrange(len(NATIONS))
        return (
            f"UPDATE customer SET c_nationkey = {nation}, c_phone = concat('{nation + 10}', substring(c_phone, 3)) "
            f"WHERE c_custkey % 15 = {self.rng.randrange(15)}"
        )

    def u_part_size(self) -> str:
        size = self.rng.choice(["15", "p_size + 1", "NULL", "9"])
        return f"UPDATE part SET p_size = {size} WHERE p_partkey % 17 = {self.rng.randrange(17)}"

    def u_part_kind(self) -> str:
        r = self.rng
        kind = r.choice(
            [
                "p_brand = 'Brand#23', p_container = 'MED BOX'",
                "p_type = 'ECONOMY ANODIZED STEEL'",
                "p_type = 'PROMO BRUSHED BRASS'",
                "p_name = concat('forest ', p_name)",
                "p_brand = 'Brand#45'",
            ]
        )
        return f"UPDATE part SET {kind} WHERE p_partkey % 23 = {r.randrange(23)}"

    def u_supplier_nation(self) -> str:
        r = self.rng
        nation = NATION_KEY[
            r.choice(["GERMANY", "FRANCE", "CANADA", "SAUDI ARABIA", "BRAZIL", "JAPAN", "PERU"])
        ]
        return f"UPDATE supplier SET s_nationkey = {nation}, s_acctbal = s_acctbal + 10 WHERE s_suppkey = {r.randint(1, self.n_suppliers)}"

    def u_nation_region(self) -> str:
        r = self.rng
        return f"UPDATE nation SET n_regionkey = {r.randrange(len(REGIONS))} WHERE n_nationkey = {r.randrange(len(NATIONS))}"
