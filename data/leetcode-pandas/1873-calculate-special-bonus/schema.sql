CREATE TABLE Employees (
  employee_id INT PRIMARY KEY,
  name VARCHAR(30),
  salary INT
);
