CREATE TABLE Customers (
  id INT PRIMARY KEY,
  name VARCHAR(255)
);
CREATE TABLE Orders (
  id INT PRIMARY KEY,
  customerId INT
);
