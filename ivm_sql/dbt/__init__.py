"""dbt projects: the models marked ``materialized_view``, compiled by dbt, kept by ivm."""
