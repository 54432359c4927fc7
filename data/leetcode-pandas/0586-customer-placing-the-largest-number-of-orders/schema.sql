CREATE TABLE Orders (
  order_number INT PRIMARY KEY,
  customer_number INT
);
