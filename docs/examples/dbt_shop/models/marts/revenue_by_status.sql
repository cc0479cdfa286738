{% set statuses = ['new', 'shipped'] %}
-- A Jinja loop: one revenue column per status, per category.
select category,
{%- for status in statuses %}
       sum(case when status = '{{ status }}' then amount end) as {{ status }}_revenue,
{%- endfor %}
       count(*) as lines
from {{ ref('order_lines') }}
group by category
