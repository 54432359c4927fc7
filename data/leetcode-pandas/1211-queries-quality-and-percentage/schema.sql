CREATE TABLE Queries (
  query_name VARCHAR(30),
  result VARCHAR(50),
  position INT,
  rating INT
);
