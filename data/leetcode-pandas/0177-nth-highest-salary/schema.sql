CREATE TABLE Employee (
  id INT PRIMARY KEY,
  salary INT
);
