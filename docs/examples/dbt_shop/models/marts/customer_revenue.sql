-- Every customer, with or without orders: a left join, then COUNT and SUM per customer.
select c.customer_id, c.name, c.country,
       count(l.order_id) as orders, sum(l.amount) as revenue
from {{ ref('stg_customers') }} as c
left join {{ ref('order_lines') }} as l on l.customer_id = c.customer_id
group by c.customer_id, c.name, c.country
