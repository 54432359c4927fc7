CREATE TABLE SalesPerson (
  sales_id INT PRIMARY KEY,
  name VARCHAR(255),
  salary INT,
  commission_rate INT,
  hire_date DATE
);
CREATE TABLE Company (
  com_id INT PRIMARY KEY,
  name VARCHAR(255),
  city VARCHAR(255)
);
CREATE TABLE Orders (
  order_id INT PRIMARY KEY,
  order_date DATE,
  com_id INT,
  sales_id INT,
  amount INT
);
