CREATE TABLE Courses (
  student VARCHAR(255),
  class VARCHAR(255),
  PRIMARY KEY (student, class)
);
