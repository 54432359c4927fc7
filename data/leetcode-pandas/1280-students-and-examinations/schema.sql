CREATE TABLE Students (
  student_id INT PRIMARY KEY,
  student_name VARCHAR(20)
);
CREATE TABLE Subjects (
  subject_name VARCHAR(20) PRIMARY KEY
);
CREATE TABLE Examinations (
  student_id INT,
  subject_name VARCHAR(20)
);
