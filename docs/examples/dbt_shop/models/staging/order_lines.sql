{{ config(materialized='ephemeral') }}
-- An ephemeral model: dbt inlines it as a CTE into the models that read it.
select o.order_id, o.customer_id, o.status, p.category, o.qty, o.qty * p.price as amount
from {{ ref('stg_orders') }} as o
join {{ ref('products') }} as p on o.product_id = p.id
