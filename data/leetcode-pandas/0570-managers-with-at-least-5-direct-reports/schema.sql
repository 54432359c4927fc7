CREATE TABLE Employee (
  id INT PRIMARY KEY,
  name VARCHAR(255),
  department VARCHAR(255),
  managerId INT
);
