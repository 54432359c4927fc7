CREATE TABLE Store (
  bill_id INT PRIMARY KEY,
  customer_id INT,
  amount INT
);
