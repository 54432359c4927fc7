CREATE TABLE Product (
  product_id INT PRIMARY KEY,
  product_name VARCHAR(10),
  unit_price INT
);
CREATE TABLE Sales (
  seller_id INT,
  product_id INT,
  buyer_id INT,
  sale_date DATE,
  quantity INT,
  price INT
);
