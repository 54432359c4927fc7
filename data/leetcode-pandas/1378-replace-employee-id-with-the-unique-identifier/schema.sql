CREATE TABLE Employees (
  id INT PRIMARY KEY,
  name VARCHAR(20)
);
CREATE TABLE EmployeeUNI (
  id INT,
  unique_id INT,
  PRIMARY KEY (id, unique_id)
);
