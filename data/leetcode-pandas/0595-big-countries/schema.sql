CREATE TABLE World (
  name VARCHAR(255) PRIMARY KEY,
  continent VARCHAR(255),
  area INT,
  population INT,
  gdp BIGINT
);
