CREATE TABLE Accounts (
  account_id INT PRIMARY KEY,
  income INT
);
