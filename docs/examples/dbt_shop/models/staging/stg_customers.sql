select id as customer_id, name, coalesce(country, 'unknown') as country
from {{ ref('customers') }}
