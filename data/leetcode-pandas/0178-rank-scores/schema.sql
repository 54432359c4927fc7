CREATE TABLE Scores (
  id INT PRIMARY KEY,
  score DECIMAL(3, 2)
);
