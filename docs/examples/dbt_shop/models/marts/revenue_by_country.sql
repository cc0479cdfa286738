-- A mart over a mart: ivm refreshes customer_revenue first, then this from its changes.
select country, count(*) as customers, sum(orders) as orders, sum(revenue) as revenue
from {{ ref('customer_revenue') }}
group by country
