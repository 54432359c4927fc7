CREATE TABLE DailySales (
  date_id DATE,
  make_name VARCHAR(20),
  lead_id INT,
  partner_id INT
);
