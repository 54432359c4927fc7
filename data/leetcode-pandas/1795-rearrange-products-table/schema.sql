CREATE TABLE Products (
  product_id INT PRIMARY KEY,
  store1 INT,
  store2 INT,
  store3 INT
);
