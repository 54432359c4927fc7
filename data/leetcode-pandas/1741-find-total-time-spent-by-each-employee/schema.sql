CREATE TABLE Employees (
  emp_id INT,
  event_day DATE,
  in_time INT,
  out_time INT,
  PRIMARY KEY (emp_id, event_day, in_time)
);
