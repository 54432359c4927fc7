CREATE TABLE Activities (
  sell_date DATE,
  product VARCHAR(20)
);
