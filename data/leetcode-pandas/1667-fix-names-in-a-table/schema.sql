CREATE TABLE Users (
  user_id INT PRIMARY KEY,
  name VARCHAR(40)
);
