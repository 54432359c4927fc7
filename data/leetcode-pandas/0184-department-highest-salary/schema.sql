CREATE TABLE Employee (
  id INT PRIMARY KEY,
  name VARCHAR(255),
  salary INT,
  departmentId INT
);
CREATE TABLE Department (
  id INT PRIMARY KEY,
  name VARCHAR(255)
);
