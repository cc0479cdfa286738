"""The dbt materialization that leaves the marked models to ivm, so that ``dbt run`` and
``dbt test`` keep working in a dbt project ivm maintains.

dbt-spark has no ``materialized_view`` materialization: dbt's default one fails ("not
implemented for this adapter"). ``ivm init`` in a dbt project writes this one into its
macros folder: for a marked model, ``dbt run`` runs no statement of the model's; it warns
when ivm has not created the model yet (the first ``ivm refresh`` does, after ``dbt run``
has built the tables it reads). ``dbt test`` then reads the model as ivm keeps it.
"""

from __future__ import annotations

from pathlib import Path

from ivm_sql.dbt.manifest import MARK

MACRO_FILE = Path("macros") / "ivm" / f"{MARK}.sql"

MACRO = f"""\
{{#- Written by `ivm init`: the models configured materialized='{MARK}' are kept by
    ivm, which creates them on `ivm refresh` and then applies only what changed in what they
    read. dbt run leaves them as they are; dbt test reads them. -#}}
{{% materialization {MARK}, adapter='spark' %}}
  {{%- set kept = load_cached_relation(this) -%}}
  {{%- if kept is none -%}}
    {{{{ exceptions.warn("model " ~ this ~ " is kept by ivm and does not exist yet: run ivm refresh") }}}}
  {{%- endif -%}}
  {{%- call statement('main') -%}} select 1 {{%- endcall -%}}
  {{{{ return({{'relations': [] if kept is none else [kept]}}) }}}}
{{% endmaterialization %}}
"""


def write_macro(root: Path) -> Path | None:
    """Write the materialization into the dbt project at ``root``; the path written, or None
    when it is there already, as written."""
    path = root / MACRO_FILE
    if path.is_file() and path.read_text(encoding="utf-8") == MACRO:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MACRO, encoding="utf-8")
    return path
