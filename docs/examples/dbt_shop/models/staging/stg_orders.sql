-- A view model: dbt publishes it as a Spark view; ivm reads its SQL where a mart reads it.
select id as order_id, customer_id, product_id, coalesce(qty, 0) as qty, status
from {{ ref('orders') }}
where status is null or status <> 'cancelled'
